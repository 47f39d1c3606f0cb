//! The Python side of a run's cell: the fd-3 protocol's vocabulary ([`PythonProtocol`]) and its
//! captured standard streams, on the cell layer (`code-runtime-cell`), which does the rest.

use std::time::Duration;

use code_runtime::Limits;
use code_runtime::provider::{Answer, CallId, Ending, Start, StopReason};
use code_runtime_cell::{
    Callee, CellRun, CellSubstrate, Framing, Incoming, Launch, Launched, Origin, Protocol, Stream,
    Unread,
};
use futures::future::BoxFuture;

use crate::PythonConfig;
use crate::cell::PythonCell;
use crate::frame::{self, ChildFrame, Done};
use crate::pipe::PipeLines;
use crate::probe::Probe;
use crate::session_frame;

/// The `tracing` target of the wire: every frame either side writes, at `TRACE` level, as
/// `direction` (`host` or `child`) and `frame`; the prelude as `prelude_bytes`.
pub(crate) const WIRE: &str = "code_runtime_python::wire";

/// How long teardown reads the standard streams of a cell whose processes are dead.
const DRAIN_WITHIN: Duration = Duration::from_secs(1);

/// One run's cell, seen from the host.
pub(crate) type ChildSubstrate = CellSubstrate<PythonProtocol>;

/// The fd-3 protocol of one run (docs/python-frame-protocol.md), and the program's raw stdout and
/// stderr, which are output too.
pub(crate) struct PythonProtocol {
    /// Sent once the child acknowledges `boot`.
    program: Option<String>,
    stdout: PipeLines,
    stderr: PipeLines,
    /// The child sent its `done` frame: the program settled.
    settled: bool,
}

/// Starts a cell for a run under `limits` and sends its interpreter the bootstrap's bytecode
/// (the prelude, a few tens of kilobytes into an empty socket buffer), or forks one from the
/// zygote.
/// A zygote's fork needs no prelude: the zygote loaded the bootstrap.
pub(crate) async fn launch(
    config: &PythonConfig,
    probe: &Probe,
    (cell, origin): (&PythonCell, Origin<'_>),
    limits: &Limits,
) -> Result<Launched, Ending> {
    let prelude: &[u8] = match origin {
        Origin::Plan(_) => &probe.bootstrap.prelude,
        Origin::Zygote(_) => &[],
    };
    tracing::trace!(target: WIRE, direction = "host", prelude_bytes = prelude.len());
    code_runtime_cell::launch(Launch {
        origin,
        limits: cell.limits(limits),
        stdout: Stream::Pipe { nonblocking: false },
        stderr: Stream::Pipe { nonblocking: false },
        first: prelude,
        framing: Framing::Lines,
        max_frame_bytes: config.frame_bytes(),
        what: "python",
    })
    .await
}

/// The run's substrate on `launched`: `boot` first, then the program once the interpreter
/// acknowledges.
pub(crate) fn run(mut launched: Launched, config: &PythonConfig, start: Start) -> ChildSubstrate {
    let cap = start.limits.output_bytes();
    let (stdout, stderr) = launched.take_streams();
    // A session's state crosses in one frame each way.
    let max_frame_bytes =
        start.session.as_ref().map(|_| config.session_frame_bytes(start.limits.max_session_bytes));
    let boot = frame::boot(
        &start.namespaces,
        &start.globals,
        (start.determinism, &start.replay),
        start.session.as_deref().map(|state| (state, start.limits.max_session_bytes)),
        // The child holds what it sends to the run's own limit: only the state may be longer.
        (start.limits.max_output_bytes, config.frame_bytes()),
    );
    let protocol = PythonProtocol {
        program: Some(start.program),
        stdout: PipeLines::new(stdout, cap),
        stderr: PipeLines::new(stderr, cap),
        settled: false,
    };
    let run = CellRun {
        limits: start.limits,
        memory: start.memory,
        table: start.table,
        // The interpreter's own memory is the program's: the whole cell is held to the budget.
        overhead_bytes: 0,
        // Nothing of a Python run happens in the host before its cell takes it.
        prepaid: Duration::ZERO,
        // A session's values follow the boot line, raw.
        first: std::iter::once(line(&boot))
            .chain(start.session.as_deref().and_then(session_frame::boot_values))
            .collect(),
        max_frame_bytes,
    };
    launched.run(protocol, run)
}

/// `frame` as a line on fd 3.
fn line(frame: &str) -> Vec<u8> {
    code_runtime_cell::frame(Framing::Lines, frame.as_bytes())
}

impl Protocol for PythonProtocol {
    type Frame = ChildFrame;
    // What the program prints crosses as `log` frames the loop reads as they come; the pipes are
    // drained at the end instead.
    const DRAINS_CHANNEL: bool = false;

    fn parse(frame: &[u8], room: usize, _: &Limits) -> Result<Option<ChildFrame>, Unread> {
        // A line that is not a frame of the protocol is dropped: the child's own lines all are.
        ChildFrame::parse_within(frame, room).map_err(|_| Unread::TooLarge)
    }

    fn on_frame(&mut self, frame: ChildFrame, outbox: &mut Vec<Vec<u8>>) -> Incoming {
        match frame {
            ChildFrame::BootAck => {
                // The first acknowledgement gets the program; later ones mean nothing.
                if let Some(program) = self.program.take() {
                    outbox.push(line(&frame::run(&program)));
                }
                Incoming::Nothing
            }
            // Nothing counts before the child acknowledged `boot`.
            _ if self.program.is_some() => Incoming::Nothing,
            ChildFrame::Log { text } => Incoming::Log(text),
            ChildFrame::Call { id, global, name, args, replayed } => {
                Incoming::Call { id, callee: Callee::Named { global, name }, args, replayed }
            }
            ChildFrame::State(capture) => Incoming::Captured(capture),
            ChildFrame::Done(done) => {
                self.settled = true;
                Incoming::Ended(ending(done))
            }
        }
    }

    fn settle(&self, call: CallId, answer: Answer) -> Vec<u8> {
        line(&frame::reply(call, &answer))
    }

    fn trace(&self, from_cell: bool, frame: &[u8]) {
        let direction = if from_cell { "child" } else { "host" };
        let frame = frame.strip_suffix(b"\n").unwrap_or(frame);
        tracing::trace!(target: WIRE, direction, frame = %String::from_utf8_lossy(frame));
    }

    fn poll_output(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<String>> {
        for pipe in [&mut self.stdout, &mut self.stderr] {
            if let std::task::Poll::Ready(Some(line)) = pipe.poll_line(cx) {
                return std::task::Poll::Ready(Some(line));
            }
        }
        std::task::Poll::Pending
    }

    fn drain_output(&mut self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async move {
            if self.settled {
                // What the program wrote to fd 1 and 2 before its `done` frame is in the pipes
                // already (a write returns once its bytes are there); what its leftover
                // processes write after it is no run's. So a settled run takes what is there
                // instead of waiting for its cell's processes to die (end of file).
                let mut logs = self.stdout.ready();
                logs.extend(self.stderr.ready());
                return logs;
            }
            let mut logs = self.stdout.drain(DRAIN_WITHIN).await;
            logs.extend(self.stderr.drain(DRAIN_WITHIN).await);
            logs
        })
    }
}

/// The run's ending for the child's `done` frame.
fn ending(done: Done) -> Ending {
    match done {
        Done::Completed(value) => Ending::Completed(value),
        Done::Threw(message) => Ending::Threw(message),
        Done::ReturnedFunction => Ending::ReturnedFunction,
        Done::InvalidOutput => Ending::InvalidOutput,
        Done::OutputExceeded => Ending::Stopped(StopReason::OutputExceeded),
    }
}
