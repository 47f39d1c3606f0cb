//! The provider SPI: everything a provider crate needs to implement [`CodeRuntime`], and nothing a
//! consumer does.
//!
//! A provider owns a *substrate* (a V8 isolate on a thread, a child process in a sandbox cell)
//! and nothing else. The host side of a run is the same for every provider and lives here once:
//!
//! - [`Provider`]: what a provider supplies (its language, how to start a run's substrate, how
//!   to close), and [`Host`], the [`CodeRuntime`] of every provider (its public type holds one
//!   and is [`Hosted`]): the gate (disposal, the cap on runs in flight and its queue), the request's checks
//!   in their fixed order (disposed, bindings, per-request limits, cancelled), and the host loop
//!   that drives a [`Substrate`]: logs into the [`OutputLedger`], binding calls through the
//!   dispatcher, the wall clock, the compute budget, cancellation and disposal.
//! - [`Ending`] and [`StopReason`]: how a run ended, mapped to the catalogued
//!   [`CodeRunFailure`](crate::CodeRunFailure) in one place.
//! - [`catalogue`]: the messages a program sees that a substrate must produce itself (the Python
//!   child receives them in its `boot` frame, so each is written once).
//! - [`HostMemory`]: what the host holds because of a run (frames, values, queued answers, log
//!   lines), charged to the run's memory budget before it is allocated.
//! - [`CpuClock`]: the compute budget's clock, a thread's or a process's.
//! - [`Spare`]: one substrate started ahead of the next run.
//! - [`reactor`]: the provider's own tokio runtime thread, which keeps timers, sockets, child
//!   processes and teardowns independent of the caller's executor.
//! - The identifier rules every provider installs names under ([`validate_bindings`] and the sets
//!   beside it).
//!
//! [`CodeRuntime`]: crate::CodeRuntime

mod approvals;
pub mod catalogue;
mod clock;
mod dispatch;
mod either;
mod ending;
mod gate;
mod globals;
mod hint;
mod host;
mod journal;
mod ledger;
/// The process-wide runtime that owns every run's timers, sockets and teardown (its own module
/// at the crate's root, so that what providers do not own, a session store, reaches it too).
pub use crate::reactor;
mod report;
mod session_turn;
mod spare;
mod stops;
mod switchboard;

pub use crate::binding::BindingFuture;
pub use crate::memory::{Held, HostMemory, LOG_LINE_BYTES, OverBudget};
pub use crate::program_text::unfenced;
pub use crate::provider::clock::CpuClock;
pub use crate::provider::dispatch::{BindingTable, CallId, FunctionId};
pub use crate::provider::either::Either;
pub use crate::provider::ending::{Ending, StopReason};
pub use crate::provider::gate::{DEFAULT_MAX_CONCURRENT_RUNS, RunGate, RunPermit};
pub use crate::provider::globals::{ProgramGlobal, ProgramGlobals, ToolIndex};
pub use crate::provider::host::{
    Answer, Determinism, Event, Host, Hosted, Provider, Recorded, Start, Substrate, Teardown,
};
pub use crate::provider::ledger::{Admission, OutputLedger, shrink_result};
pub use crate::provider::spare::Spare;
pub use crate::validation::{
    CALL_TOOL, MAX_VALUE_DEPTH, PORTABLE_RESERVED_WORDS, PROGRAM_WRAPPER_NAME,
    RESERVED_BINDING_GLOBALS, RESERVED_ERROR_MEMBERS, SHADOWED_GLOBALS, is_dunder_member,
    is_portable_identifier, is_usable_identifier, validate_bindings, validate_request,
};
/// Re-exported because [`CodeRuntime`](crate::CodeRuntime) is declared with it; implementors
/// write `#[code_runtime::provider::async_trait]`.
pub use async_trait::async_trait;
