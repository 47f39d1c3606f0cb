//! The file formats of the `code-runtime` command (docs/cli.md) and what a run's
//! binding calls were, as a library: the command reads them, and the conformance suite reads the
//! same files, so a case's bindings mean exactly what they mean on the command line.
//!
//! - [`load_bindings`]: a bindings file, namespaces whose functions are canned behaviours (`echo`,
//!   `reply`, `reject`, optionally after `delayMs`) or external commands.
//! - [`LimitsFile`]: a limits file, each budget by its key (`timeoutMs`, `computeMs`, ..).
//! - [`Recorder`]: every binding call of a run, written as the command's `--record` lines as the
//!   calls settle (nothing kept, the file bounded), or kept as [`CallRecord`]s for a harness.
//! - [`EventLog`]: a run's live events, written as the command's `--events` lines.
//! - [`read_document`] and [`read_text`]: files read with a size bound and parsed strictly (no
//!   recursion, no key given twice), so a FIFO, `/dev/zero` or a typo is a clear error.
//! - [`from_document`]: a document read into a type by serde, each error naming its [`KeyPath`].
//!
//! Every error is a [`FixtureError`]: one line, naming the file.

mod bindings_file;
mod command;
mod document;
mod event_log;
mod limits_file;
mod recorder;
mod typed_document;

pub use crate::bindings_file::{BindingsFile, bindings_from_json, load_bindings};
pub use crate::command::max_concurrent_commands;
pub use crate::document::{
    MAX_DOCUMENT_BYTES, read_document, read_program, read_text, read_text_within,
};
pub use crate::event_log::{EventLog, event_line};
pub use crate::limits_file::LimitsFile;
pub use crate::recorder::{
    CallRecord, DEFAULT_RECORD_BYTES, RecordFull, Recorder, Recording, Rotation, private_file,
};
pub use crate::typed_document::{
    KeyPath, NonNegative, Object, ObjectShape, Positive, Text, from_document,
};

/// A file that cannot be used: unreadable, too large, not JSON, or not in the format. The
/// message is one line and names the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FixtureError(String);

impl FixtureError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into().replace('\n', " "))
    }
}
