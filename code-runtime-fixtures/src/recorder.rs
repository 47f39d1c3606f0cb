//! [`Recorder`]: every binding call of a run, as structured [`CallRecord`]s, optionally written as
//! the command line's `--record` lines while the run goes on.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use code_runtime::json::{self, JsonValue};
use code_runtime::{BindingError, JsonValue as Value};

use crate::copied;

/// One binding call: who was called with what, how it settled, and when.
#[derive(Debug)]
pub struct CallRecord {
    /// The namespace global.
    pub namespace: String,
    /// The function name.
    pub function: String,
    /// The argument the host received.
    pub args: JsonValue,
    /// The resolution, or the rejection's message and data.
    pub outcome: Result<JsonValue, (String, Option<JsonValue>)>,
    /// When the call started, from the recorder's creation.
    pub started: Duration,
    /// How long it took.
    pub duration: Duration,
}

impl CallRecord {
    /// The `--record` line of CLI.md:
    /// `{"namespace","function","args","ok"|"error","startedMs","durationMs"}` (a rejection's data
    /// follows as `"data"` when there is any). Encoded without recursion.
    pub fn to_json_line(&self) -> String {
        let mut line = format!(
            "{{\"namespace\":{},\"function\":{},\"args\":",
            json::quote(&self.namespace),
            json::quote(&self.function)
        );
        json::encode_into(&self.args, &mut line);
        match &self.outcome {
            Ok(value) => {
                line.push_str(",\"ok\":");
                json::encode_into(value, &mut line);
            }
            Err((message, data)) => {
                line.push_str(",\"error\":");
                line.push_str(&json::quote(message));
                if let Some(data) = data {
                    line.push_str(",\"data\":");
                    json::encode_into(data, &mut line);
                }
            }
        }
        line.push_str(&format!(
            ",\"startedMs\":{},\"durationMs\":{}}}",
            milliseconds(self.started),
            milliseconds(self.duration)
        ));
        line
    }
}

impl Drop for CallRecord {
    fn drop(&mut self) {
        // A program chose these values; they may nest arbitrarily deep.
        json::drop_value(std::mem::take(&mut self.args));
        match &mut self.outcome {
            Ok(value) => json::drop_value(std::mem::take(value)),
            Err((_, data)) => {
                if let Some(data) = data.take() {
                    json::drop_value(data);
                }
            }
        }
    }
}

/// Where the calls of a run are recorded. Cheap to clone; every clone records into the same
/// place. [`Recorder::off`] records nothing and costs nothing.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    inner: Option<Arc<Mutex<Inner>>>,
}

struct Inner {
    origin: Instant,
    records: Vec<CallRecord>,
    /// Where lines go as calls settle, if anywhere.
    sink: Option<Box<dyn Write + Send>>,
    write_error: Option<String>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("records", &self.records.len()).finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder that keeps nothing.
    pub fn off() -> Self {
        Self::default()
    }

    /// A recorder that keeps every call, for [`take_records`](Self::take_records).
    pub fn keeping() -> Self {
        Self::with(None)
    }

    /// A recorder that writes each call's line to `sink` as it settles (and keeps it too).
    pub fn writing(sink: impl Write + Send + 'static) -> Self {
        Self::with(Some(Box::new(sink)))
    }

    fn with(sink: Option<Box<dyn Write + Send>>) -> Self {
        let inner = Inner { origin: Instant::now(), records: Vec::new(), sink, write_error: None };
        Self { inner: Some(Arc::new(Mutex::new(inner))) }
    }

    /// Whether calls are recorded at all.
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// A detached copy of `args`, when recording (the host closure consumes the original): take
    /// it before the call, and hand it to [`record`](Recorder::record) once the call settled.
    pub fn copy(&self, args: &Value) -> Option<JsonValue> {
        self.inner.as_ref()?;
        copied(args).ok()
    }

    /// Records one settled call of `namespace.function` that started at `started`.
    pub fn record(
        &self,
        namespace: &str,
        function: &str,
        args: JsonValue,
        outcome: &Result<JsonValue, BindingError>,
        started: Instant,
    ) {
        let Some(inner) = &self.inner else { return };
        let outcome = match outcome {
            Ok(value) => Ok(copied(value).unwrap_or(JsonValue::Null)),
            Err(error) => {
                Err((error.message().to_owned(), error.data().and_then(|d| copied(d).ok())))
            }
        };
        let mut inner = inner.lock().unwrap_or_else(PoisonError::into_inner);
        let record = CallRecord {
            namespace: namespace.to_owned(),
            function: function.to_owned(),
            args,
            outcome,
            started: started.saturating_duration_since(inner.origin),
            duration: started.elapsed(),
        };
        let line = inner.sink.as_ref().map(|_| record.to_json_line());
        if let (Some(mut line), Some(sink)) = (line, inner.sink.as_mut()) {
            line.push('\n');
            if let Err(error) = sink.write_all(line.as_bytes()).and_then(|()| sink.flush()) {
                inner.write_error.get_or_insert_with(|| error.to_string());
            }
        }
        inner.records.push(record);
    }

    /// The calls recorded so far, in the order they settled, leaving none.
    pub fn take_records(&self) -> Vec<CallRecord> {
        match &self.inner {
            Some(inner) => {
                std::mem::take(&mut inner.lock().unwrap_or_else(PoisonError::into_inner).records)
            }
            None => Vec::new(),
        }
    }

    /// The first error writing a line, if one failed.
    pub fn write_error(&self) -> Option<String> {
        self.inner.as_ref()?.lock().unwrap_or_else(PoisonError::into_inner).write_error.clone()
    }
}

/// A duration in milliseconds as a JSON number, to the microsecond.
/// A duration in milliseconds, to the microsecond, as a JSON number.
pub(crate) fn milliseconds(duration: Duration) -> String {
    let rounded = (duration.as_secs_f64() * 1e6).round() / 1e3;
    json::encode(&JsonValue::Number(json::number_from_f64(rounded).unwrap_or_else(|_| 0.into())))
}
