//! Sessions: a named sequence of runs in which what a program leaves behind carries to the next
//! run as data the host holds, never as a live process (docs/sessions.md).
//!
//! Every run of a session still starts in a fresh cell. Before its program, the cell restores the
//! session's [`Definition`]s (top-level imports, functions and classes, as source) and its
//! [`SessionValue`]s (top-level variables, as bytes the cell made: pickle protocol 5 in Python,
//! V8's serializer in TypeScript). When the program ends, the cell hands back a [`Capture`] of
//! what it can carry and what it cannot, with the reason. The host never deserializes a value: it
//! stores opaque bytes with each name's type and size, in a [`SessionStore`] ([`Sessions`] adds
//! the rule that a session has one run at a time).
//!
//! - [`SessionId`]: a session's name and the owner it belongs to.
//! - [`SessionStore`]: where states are kept, [`MemorySessionStore`] (the default) or
//!   [`DirectorySessionStore`] (files a host's replicas share, signed, sequence-numbered).
//! - [`SessionReport`]: what a result says of its session
//!   ([`CodeRunResult::session`](crate::CodeRunResult::session)).

mod directory;
mod memory;
mod report;
mod state;
mod store;
mod turns;

pub use directory::DirectorySessionStore;
pub use memory::MemorySessionStore;
pub use report::{DroppedName, Kept, Restored, SessionReport};
pub use state::{Capture, Definition, Dropped, SessionId, SessionState, SessionValue};
pub use store::{Loaded, SessionError, SessionStore, SessionSummary, TurnHold};
pub use turns::Sessions;

pub(crate) use turns::Turn;
