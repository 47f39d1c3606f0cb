//! [`Ending`]: how a run ended, before the output budget is applied; and [`StopReason`]: why the
//! host stopped it. Each maps to exactly one catalogued failure, here.

use std::fmt;

use crate::json::JsonValue;
use crate::result::CodeRunFailure;

/// How a run ended, as the host loop learned it. The output ledger turns it into the result
/// ([`OutputLedger::settle`](crate::provider::OutputLedger::settle)).
#[derive(Debug)]
#[non_exhaustive]
pub enum Ending {
    /// The program completed, returning `Some(value)` or nothing.
    Completed(Option<JsonValue>),
    /// The program threw, or did not parse or compile; the rendered exception
    /// (`exception`). A substrate that cannot render what was thrown passes
    /// [`catalogue::UNRENDERABLE_EXCEPTION`](crate::provider::catalogue::UNRENDERABLE_EXCEPTION).
    Threw(String),
    /// The program's completion was not lossless JSON (`invalid-output`).
    InvalidOutput,
    /// The program's completion was a function (`invalid-output`, "the program returned a
    /// function; call it"): the model wrote the program as a function and never called it.
    ReturnedFunction,
    /// The host stopped the run.
    Stopped(StopReason),
    /// The substrate went away without settling, with its exit code when known (`worker-exit`).
    Exited(Option<i32>),
    /// The substrate failed (`worker-exit`, `worker error: <detail>`): it could not start, broke
    /// the protocol, or crashed in a way the provider can name.
    Failed(String),
    /// The host paused the run for a decision (made by the host loop, never by a substrate).
    Paused(Box<crate::checkpoint::Paused>),
}

/// Why a run was stopped before the program settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The request's token was cancelled (`abort`).
    Cancelled,
    /// The runtime was disposed (`abort`).
    Disposed,
    /// The wall clock ran out (`timeout`).
    WallClock {
        /// The run's wall clock, in milliseconds.
        max_wall_ms: u64,
    },
    /// The compute budget ran out (`timeout`).
    Compute {
        /// The run's compute budget, in milliseconds.
        compute_ms: u64,
    },
    /// The output budget was exceeded (`output-limit`).
    OutputExceeded,
    /// The program exhausted its memory budget (`worker-exit`).
    OutOfMemory {
        /// The run's memory budget, in MiB.
        max_memory_mb: u64,
    },
    /// What the program made the host hold (frames, values, queued answers, log lines: see
    /// [`HostMemory`](crate::provider::HostMemory)) outgrew its memory budget (`worker-exit`).
    HostMemory {
        /// The run's memory budget, in MiB.
        max_memory_mb: u64,
    },
}

impl Ending {
    /// The failure this ending is, or the completion value.
    pub(crate) fn into_failure(self) -> Result<Option<JsonValue>, CodeRunFailure> {
        match self {
            Ending::Completed(value) => Ok(value),
            Ending::Threw(message) => Err(CodeRunFailure::exception(message)),
            Ending::InvalidOutput => Err(CodeRunFailure::invalid_output()),
            Ending::ReturnedFunction => Err(CodeRunFailure::returned_function()),
            Ending::Stopped(reason) => Err(reason.failure()),
            Ending::Exited(Some(code)) => Err(CodeRunFailure::worker_exited(code)),
            Ending::Exited(None) => Err(CodeRunFailure::worker_exited("unknown")),
            Ending::Failed(detail) => Err(CodeRunFailure::worker_error(detail)),
            // The ledger settles a pause before it asks for a failure.
            Ending::Paused(_) => Err(CodeRunFailure::worker_error("paused")),
        }
    }
}

impl StopReason {
    fn failure(self) -> CodeRunFailure {
        match self {
            StopReason::Cancelled => CodeRunFailure::cancelled(),
            StopReason::Disposed => CodeRunFailure::runtime_disposed(),
            StopReason::WallClock { max_wall_ms } => {
                CodeRunFailure::wall_clock_reached(max_wall_ms)
            }
            StopReason::Compute { compute_ms } => {
                CodeRunFailure::compute_budget_exhausted(compute_ms)
            }
            // The ledger builds the limit result itself, with the budget in its message; this
            // is only what a `StopReason` says of itself.
            StopReason::OutputExceeded => CodeRunFailure::output_budget_exceeded(),
            StopReason::OutOfMemory { max_memory_mb } => CodeRunFailure::worker_error(format!(
                "out of memory: the program exceeded its {max_memory_mb} MB memory budget"
            )),
            StopReason::HostMemory { max_memory_mb } => CodeRunFailure::worker_error(format!(
                "out of memory: what the program handed the host (values, calls, output) \
                 exceeded its {max_memory_mb} MB memory budget"
            )),
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.failure().message())
    }
}
