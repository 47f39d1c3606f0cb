//! [`Protocol`]: what a provider's cells say on their channel, and what the host answers. The
//! cell layer does the rest: reading, budgets, calls, teardown.

use std::task::{Context, Poll};

use code_runtime::provider::{Answer, CallId, Ending, FunctionId};
use code_runtime::{JsonValue, Limits};
use futures::future::BoxFuture;

/// The vocabulary of one provider's channel: how its frames are parsed, what each is to the run,
/// how a call is answered, and what the cell says besides its frames. (How they are delimited is
/// the cell's [`Launch::framing`](crate::Launch::framing), fixed before a run has the cell.)
pub trait Protocol: Send + 'static {
    /// A frame from the cell, parsed.
    type Frame: Send + 'static;

    /// Whether teardown reads the channel of a cell the host stopped for the lines it wrote
    /// before it died (they are still the program's output).
    const DRAINS_CHANNEL: bool;

    /// Parses one frame with at most `room` bytes of host memory for what it holds: `Ok(None)`
    /// for a frame to drop. A long frame is parsed on a blocking thread, so this is a plain
    /// function of its arguments.
    ///
    /// # Errors
    ///
    /// [`Unread`]: a frame the run cannot afford, or one that breaks the protocol.
    fn parse(frame: &[u8], room: usize, limits: &Limits) -> Result<Option<Self::Frame>, Unread>;

    /// What `frame` is to the run. A frame for the cell (the program, once the cell is ready for
    /// it) goes to `outbox`.
    fn on_frame(&mut self, frame: Self::Frame, outbox: &mut Vec<Vec<u8>>) -> Incoming;

    /// The frame that answers call `call` with `answer`.
    fn settle(&self, call: CallId, answer: Answer) -> Vec<u8>;

    /// A frame as it is read, before anything else is done with it, or as it is queued for the
    /// cell (`from_cell` tells which way it goes): for a `tracing` target of the wire.
    fn trace(&self, _from_cell: bool, _frame: &[u8]) {}

    /// The next line of output the cell wrote outside its channel (its standard streams), if
    /// the protocol reads any.
    fn poll_output(&mut self, _cx: &mut Context<'_>) -> Poll<Option<String>> {
        Poll::Ready(None)
    }

    /// At teardown, once the cell's processes are dead: the lines of output outside the channel
    /// that have not been read yet.
    fn drain_output(&mut self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(std::future::ready(Vec::new()))
    }

    /// What the cell said of its own death (a fatal error it reported, what it wrote to its
    /// standard error), for an ending the loop could only guess at ([`Ending::Exited`]).
    fn last_words(&mut self) -> Option<String> {
        None
    }
}

/// What a frame from the cell is to the run.
#[derive(Debug)]
pub enum Incoming {
    /// Nothing for the host loop (an acknowledgement, a frame dropped).
    Nothing,
    /// A line of output.
    Log(String),
    /// A binding call.
    Call {
        /// The cell's id of the call.
        id: CallId,
        /// The function called.
        callee: Callee,
        /// Its argument.
        args: JsonValue,
        /// Whether the cell answered it itself from the run's record
        /// ([`Event::Replayed`](code_runtime::provider::Event::Replayed)).
        replayed: bool,
    },
    /// What carries to the session's next run
    /// ([`Event::Captured`](code_runtime::provider::Event::Captured)).
    Captured(code_runtime::Capture),
    /// The program settled.
    Ended(Ending),
}

/// How a call names its function.
#[derive(Debug)]
pub enum Callee {
    /// By the id the host gave it.
    Id(FunctionId),
    /// By namespace and name, which the host resolves; a name the request lacks is a stray
    /// call, answered with a rejection.
    Named {
        /// The namespace's global.
        global: String,
        /// The function's name.
        name: String,
    },
}

/// Why a frame was not read.
#[derive(Debug)]
pub enum Unread {
    /// What it holds is more than the run may still make the host hold.
    TooLarge,
    /// It breaks the protocol: the run ends, as a protocol violation, saying why.
    Malformed(String),
}
