//! The cell layer: one run's sandbox cell as the host loop's
//! [`Substrate`](code_runtime::provider::Substrate), for every provider that runs programs in
//! cells.
//!
//! A provider supplies its [`Protocol`] (how its channel's frames are delimited and parsed, what
//! each is to the run, how a call is answered) and how its cells are started ([`Launch`]); this
//! crate does what every cell needs the same way:
//!
//! - [`launch`]: the cell started, watched on the reactor, its channel connected and its first
//!   frame sent; a [`Launched`] cell waits for a run, and [`take_or_launch`] hands a run the
//!   provider's spare when it fits.
//! - [`Frames`]: the channel cut into frames of either [`Framing`], each held to the protocol's
//!   limit and to what the run may still make the host hold before it is read whole.
//! - [`CellSubstrate`]: frames parsed (long ones off the host loop) and written (never awaited
//!   in place, so a cell that stops reading cannot stall the loop), each call answered once and
//!   its argument charged to the run's host memory, the whole cell's memory and CPU time held to
//!   the run's budgets, and teardown: the cell killed, its last output read, its end made exact
//!   (the CPU limit's signals, a frame cut short, what the cell said of its own death), its reap
//!   left to the background when the result does not depend on it.
//!
//! It sits above `code-runtime` (the SPI) and `code-runtime-sandbox` (cells), and below the
//! providers.
#![warn(missing_docs)]

mod frames;
mod launch;
mod protocol;
mod substrate;

use code_runtime::Limits;
use code_runtime::provider::{Ending, Spare, reactor};
use code_runtime_sandbox::CellLimits;

pub use crate::frames::{
    BINARY_MARK, FrameError, Frames, Framing, LENGTH_BYTES, frame, text_frame,
};
pub use crate::launch::{Channel, Launch, Launched, Origin, Stream, channel, launch};
pub use crate::protocol::{Callee, Incoming, Protocol, Unread};
pub use crate::substrate::{CellRun, CellSubstrate};

/// A cell's limits for a run under `limits`: its memory (each process's address space, the size
/// of its `/tmp`) and its CPU time. `RLIMIT_CPU` is only the kernel's backstop behind the host's
/// polling of the whole cell's CPU time, so it is rounded up and given a second.
pub fn cell_limits(limits: &Limits) -> CellLimits {
    CellLimits::new(limits.memory_bytes(), limits.compute_ms.div_ceil(1000) + 1)
}

/// A cell for a run whose cell gets `limits`: the spare when the run is one spares are made for
/// (`default`), it fits and it is alive (waiting for it if it is still starting), else one
/// `launch` starts. A spare that does not fit is discarded on the reactor.
///
/// # Errors
///
/// `launch`'s.
///
/// # Cancel safety
///
/// Dropping the future while it waits for the spare drops the cell, which kills it.
pub async fn take_or_launch(
    spare: &Spare<Launched>,
    default: bool,
    limits: &CellLimits,
    launch: impl Future<Output = Result<Launched, Ending>>,
) -> Result<Launched, Ending> {
    if default {
        if let Some(mut launched) = spare.take().await {
            if launched.fits(limits) && launched.is_alive() {
                return Ok(launched);
            }
            reactor::spawn(launched.discard());
        }
    }
    launch.await
}
