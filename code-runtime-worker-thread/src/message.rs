//! The messages between the host and an isolate thread. No V8 type crosses: what the isolate
//! reports is the host loop's own [`Event`](code_runtime::provider::Event), and what the host sends
//! back is a [`ToIsolate`].

use code_runtime::provider::CallId;
use code_runtime::{BindingError, JsonValue};

/// What the host sends the isolate thread.
#[derive(Debug)]
pub(crate) enum ToIsolate {
    /// A binding call settled: a value, or the rejection the program's error will carry.
    Settle { call: CallId, outcome: Result<JsonValue, BindingError> },
    /// Wake up and stop: the host has terminated execution.
    Stop,
}
