//! [`EventLog`]: a run's live events as the command line's `--events` lines, written as they
//! happen.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use code_runtime::json;
use code_runtime::{Decision, EventSink, RunEvent};

use crate::recorder::milliseconds;

/// The `--events` line of one event (docs/cli.md):
/// `{"event":"log","line":S}`, `{"event":"call","id":N,"namespace":S,"function":S,"args":V}`,
/// `{"event":"settled","id":N,"ok":true|"error":S,"durationMs":F}`,
/// `{"event":"approval","id":N,"call":N,"namespace":S,"function":S,"args":V}` (a call waits for a
/// decision), `{"event":"decided","id":N,"decision":"allow"|"deny"|"pause","reason"?:S,"by":S}`,
/// `{"event":"end","kind":K|null}`.
/// Encoded without recursion.
pub fn event_line(event: &RunEvent<'_>) -> String {
    match *event {
        RunEvent::Log { line } => format!("{{\"event\":\"log\",\"line\":{}}}", json::quote(line)),
        RunEvent::Call { id, namespace, function, args } => {
            let mut line = format!(
                "{{\"event\":\"call\",\"id\":{id},\"namespace\":{},\"function\":{},\"args\":",
                json::quote(namespace),
                json::quote(function)
            );
            json::encode_into(args, &mut line);
            line.push('}');
            line
        }
        RunEvent::Settled { id, error, duration } => {
            let outcome = match error {
                None => "\"ok\":true".to_owned(),
                Some(message) => format!("\"error\":{}", json::quote(message)),
            };
            format!(
                "{{\"event\":\"settled\",\"id\":{id},{outcome},\"durationMs\":{}}}",
                milliseconds(duration)
            )
        }
        RunEvent::ApprovalRequested { id, request } => {
            let mut line = format!(
                "{{\"event\":\"approval\",\"id\":{id},\"call\":{},\"namespace\":{},\"function\":{},\"args\":",
                request.call,
                json::quote(&request.namespace),
                json::quote(&request.function)
            );
            json::encode_into(&request.args, &mut line);
            line.push('}');
            line
        }
        RunEvent::ApprovalDecided { id, decision, by } => {
            let reason = match decision {
                Decision::Deny(reason) => format!(",\"reason\":{}", json::quote(reason)),
                _ => String::new(),
            };
            format!(
                "{{\"event\":\"decided\",\"id\":{id},\"decision\":{}{reason},\"by\":{}}}",
                json::quote(decision.as_str()),
                json::quote(by)
            )
        }
        RunEvent::End { kind } => {
            let kind = kind.map_or("null".to_owned(), |kind| json::quote(kind.as_str()));
            format!("{{\"event\":\"end\",\"kind\":{kind}}}")
        }
        _ => "{\"event\":\"unknown\"}".to_owned(),
    }
}

/// Writes each event of a run as one line to a writer, flushed at once, so a reader sees it
/// while the run goes on. The first write error stops the writing and is kept for
/// [`write_error`](EventLog::write_error); the run goes on.
#[derive(Clone)]
pub struct EventLog {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    sink: Box<dyn Write + Send>,
    write_error: Option<String>,
}

impl EventLog {
    /// An event log writing to `sink`.
    pub fn writing(sink: impl Write + Send + 'static) -> Self {
        Self { inner: Arc::new(Mutex::new(Inner { sink: Box::new(sink), write_error: None })) }
    }

    /// The sink a request takes ([`CodeRunRequest::events`](code_runtime::CodeRunRequest::events)).
    pub fn sink(&self) -> EventSink {
        let inner = self.inner.clone();
        EventSink::new(move |event| {
            let mut inner = inner.lock().unwrap_or_else(PoisonError::into_inner);
            if inner.write_error.is_some() {
                return;
            }
            let mut line = event_line(&event);
            line.push('\n');
            let written = inner.sink.write_all(line.as_bytes()).and_then(|()| inner.sink.flush());
            if let Err(error) = written {
                inner.write_error = Some(error.to_string());
            }
        })
    }

    /// The first write that failed, if one did.
    pub fn write_error(&self) -> Option<String> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).write_error.clone()
    }
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").finish_non_exhaustive()
    }
}
