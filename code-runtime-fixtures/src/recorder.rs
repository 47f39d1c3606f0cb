//! [`Recorder`]: every binding call of a run, written as the command line's `--record` lines
//! while the run goes on (nothing kept in memory, the file bounded), or kept as structured
//! [`CallRecord`]s for a test harness.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use code_runtime::json::{self, JsonValue};
use code_runtime::provider::catalogue;
use code_runtime::{
    ApprovalRequest, BindingArgs, BindingError, Decision, EventSink, JsonValue as Value, RunEvent,
};

/// The default bound of a record file: 1 GiB.
pub const DEFAULT_RECORD_BYTES: u64 = 1 << 30;

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
    /// The decision on a call that needed approval, and who made it.
    pub approval: Option<(String, String)>,
}

impl CallRecord {
    /// The `--record` line of docs/cli.md:
    /// `{"namespace","function","args","ok"|"error","startedMs","durationMs"}` (a rejection's data
    /// follows as `"data"` when there is any; a call that needed approval has
    /// `"approval": {"decision", "by"}` after its arguments).
    pub fn to_json_line(&self) -> String {
        let mut line = head(&self.namespace, &self.function, &self.args);
        if let Some((decision, by)) = &self.approval {
            approval(&mut line, decision, by);
        }
        let outcome = match &self.outcome {
            Ok(value) => Ok(value),
            Err((message, data)) => Err((message.as_str(), data.as_ref())),
        };
        tail(&mut line, outcome, self.started, self.duration);
        line
    }
}

/// `{"namespace":..,"function":..,"args":..`, the part of a line known when a call starts.
fn head(namespace: &str, function: &str, args: &JsonValue) -> String {
    let mut line = format!(
        "{{\"namespace\":{},\"function\":{},\"args\":",
        json::quote(namespace),
        json::quote(function)
    );
    json::encode_into(args, &mut line);
    line
}

/// `,"approval":{"decision":..,"by":..}`: the audit of a call that needed approval.
fn approval(line: &mut String, decision: &str, by: &str) {
    line.push_str(&format!(
        ",\"approval\":{{\"decision\":{},\"by\":{}}}",
        json::quote(decision),
        json::quote(by)
    ));
}

/// The rest of a line, once the call settled.
fn tail(
    line: &mut String,
    outcome: Result<&JsonValue, (&str, Option<&JsonValue>)>,
    started: Duration,
    duration: Duration,
) {
    match outcome {
        Ok(value) => {
            line.push_str(",\"ok\":");
            json::encode_into(value, line);
        }
        Err((message, data)) => {
            line.push_str(",\"error\":");
            line.push_str(&json::quote(message));
            if let Some(data) = data {
                line.push_str(",\"data\":");
                json::encode_into(data, line);
            }
        }
    }
    line.push_str(&format!(
        ",\"startedMs\":{},\"durationMs\":{}}}",
        milliseconds(started),
        milliseconds(duration)
    ));
}

/// Where the calls of a run are recorded. Cheap to clone; every clone records into the same
/// place. [`Recorder::off`] records nothing and costs nothing.
///
/// A writing recorder holds one line at a time, the one of the call being recorded, and never
/// lets its file grow past its bound: a line that would is not written, the recorder is full,
/// and [`finish`](Recording::finish) says so from then on, so the binding ends its run as
/// `output-limit` ([`BindingError::output_exceeded_because`], naming the file). A recorder
/// that [rotates](Rotation::Rotate) (a server's, shared by every run) moves a full file aside
/// instead and goes on in a fresh one, so no run fills it for the others.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    inner: Option<Arc<Mutex<Inner>>>,
}

struct Inner {
    origin: Instant,
    place: Place,
}

enum Place {
    /// Structured records, for a harness that reads them back.
    Kept(Vec<CallRecord>),
    /// Lines into a sink, at most `max_bytes` of them in all (in one file, when rotating).
    Written {
        sink: Box<dyn Write + Send>,
        written: u64,
        max_bytes: u64,
        full: bool,
        error: Option<String>,
        /// How the record is named in messages: its path, or `the record` for a bare sink.
        name: String,
        /// Where a full file goes (`<path>.1`) and where the next one starts, when rotating.
        rotation: Option<PathBuf>,
        /// The runs that made the file rotate, latest last (at most [`ROTATIONS_KEPT`]): none
        /// makes it rotate twice.
        rotated_by: VecDeque<u64>,
    },
}

/// How many rotating runs a record remembers. A rotation takes a whole bound of lines, so only a
/// run that outlived this many others' rotations could rotate twice.
const ROTATIONS_KEPT: usize = 1024;

/// What a record file does once the next line would take it past its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// It is full: the call that found it so ends its run as `output-limit`, and every later
    /// one too. For one run's record (`code-runtime run --record`).
    Stop,
    /// It is renamed `<path>.1` (replacing the one before) and a fresh file takes its place: the
    /// disk holds at most twice the bound, and the runs go on. For a server's record
    /// (`code-runtime mcp --record`), which every run of every client shares. Refused, for its
    /// own run only: a line longer than the bound on its own, and a second rotation by a run
    /// that made one already ([`BindingArgs::run`]), which would erase what the record held of
    /// other runs before its first. Erasing a line takes two runs of a bound each, never what
    /// one run sends alone.
    Rotate,
}

/// Creates (or empties) `path` for writing, readable and writable by its owner only: records
/// and event logs carry every call's arguments and results. A file that was there loses its
/// other readers before anything is written to it; a FIFO or a device is left as it is.
///
/// # Errors
///
/// The file cannot be opened, or its mode cannot be changed.
pub fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    let metadata = file.metadata()?;
    if metadata.is_file() && metadata.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.place {
            Place::Kept(records) => {
                f.debug_struct("Kept").field("records", &records.len()).finish()
            }
            Place::Written { written, max_bytes, full, rotation, .. } => f
                .debug_struct("Written")
                .field("written", written)
                .field("max_bytes", max_bytes)
                .field("full", full)
                .field("rotation", rotation)
                .finish_non_exhaustive(),
        }
    }
}

/// The record of one call under way: made by [`Recorder::start`] when the call starts, completed
/// by [`finish`](Recording::finish) once it settled.
#[derive(Debug)]
pub struct Recording {
    recorder: Arc<Mutex<Inner>>,
    namespace: String,
    function: String,
    started: Instant,
    /// A writing recorder's line so far; a keeping one's copy of the argument.
    part: Part,
    approval: Option<(String, String)>,
    /// The run that made the call, when known.
    run: Option<u64>,
}

#[derive(Debug)]
enum Part {
    Line(String),
    Args(JsonValue),
}

/// The record file reached its bound: the call that found it so ends its run as `output-limit`,
/// with this as the run's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{name} reached its bound of {max_bytes} bytes (--record-max-bytes): the run stops, as a call it made cannot be recorded"
)]
pub struct RecordFull {
    /// The bound.
    pub max_bytes: u64,
    /// The record, as messages name it (`the record file "calls.jsonl"`).
    pub name: String,
}

impl RecordFull {
    /// What the binding whose call found the record full answers: the end of its run, saying
    /// why.
    pub fn into_binding_error(self) -> BindingError {
        BindingError::output_exceeded_because(self.to_string())
    }
}

impl Recorder {
    /// A recorder that keeps nothing.
    pub fn off() -> Self {
        Self::default()
    }

    /// A recorder that keeps every call, for [`take_records`](Self::take_records): for test
    /// harnesses, whose runs are small.
    pub fn keeping() -> Self {
        Self::with(Place::Kept(Vec::new()))
    }

    /// A recorder that writes each call's line to `sink` as it settles, keeping nothing, and
    /// never more than `max_bytes` bytes in all.
    pub fn writing(sink: impl Write + Send + 'static, max_bytes: u64) -> Self {
        Self::with(Place::Written {
            sink: Box::new(sink),
            written: 0,
            max_bytes,
            full: false,
            error: None,
            name: "the record".to_owned(),
            rotation: None,
            rotated_by: VecDeque::new(),
        })
    }

    /// A recorder writing to the file at `path` ([`private_file`]: its owner's only), at most
    /// `max_bytes` bytes in it, doing what `rotation` says once it is full.
    ///
    /// # Errors
    ///
    /// The file cannot be created.
    pub fn file(path: &Path, max_bytes: u64, rotation: Rotation) -> std::io::Result<Self> {
        let file = private_file(path)?;
        Ok(Self::with(Place::Written {
            sink: Box::new(file),
            written: 0,
            max_bytes,
            full: false,
            error: None,
            name: format!("the record file {}", json::quote(&path.display().to_string())),
            rotation: (rotation == Rotation::Rotate).then(|| path.to_owned()),
            rotated_by: VecDeque::new(),
        }))
    }

    fn with(place: Place) -> Self {
        Self { inner: Some(Arc::new(Mutex::new(Inner { origin: Instant::now(), place }))) }
    }

    /// Whether calls are recorded at all.
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Starts the record of a call of `namespace.function` with `args`, before the host closure
    /// takes them; `None` when nothing is recorded.
    pub fn start(&self, namespace: &str, function: &str, args: &Value) -> Option<Recording> {
        self.start_in(None, namespace, function, args)
    }

    /// [`start`](Recorder::start) for a call of `run` ([`BindingArgs::run`]), whose calls never
    /// rotate the record twice.
    pub fn start_in(
        &self,
        run: Option<u64>,
        namespace: &str,
        function: &str,
        args: &Value,
    ) -> Option<Recording> {
        let recorder = self.inner.clone()?;
        let keeping = matches!(lock(&recorder).place, Place::Kept(_));
        let part = if keeping {
            Part::Args(args.clone())
        } else {
            Part::Line(head(namespace, function, args))
        };
        Some(Recording {
            recorder,
            namespace: namespace.to_owned(),
            function: function.to_owned(),
            started: Instant::now(),
            part,
            approval: None,
            run,
        })
    }

    /// [`start`](Recorder::start) for a binding's own call: a call that needed approval carries
    /// who approved it ([`BindingArgs::approved_by`]).
    pub fn start_call(
        &self,
        namespace: &str,
        function: &str,
        args: &BindingArgs,
    ) -> Option<Recording> {
        let recording = self.start_in(args.run(), namespace, function, args)?;
        Some(match args.approved_by() {
            Some(by) => recording.approved("allow", by),
            None => recording,
        })
    }

    /// The event sink that records each call the host denied, which never reaches a binding to
    /// record itself ([`denied`](Recorder::denied)); `None` when nothing is recorded.
    pub fn denials(&self) -> Option<EventSink> {
        if !self.is_on() {
            return None;
        }
        let recorder = self.clone();
        let asked: Mutex<HashMap<u64, ApprovalRequest>> = Mutex::default();
        Some(EventSink::new(move |event| {
            let mut asked = asked.lock().unwrap_or_else(PoisonError::into_inner);
            match event {
                RunEvent::ApprovalRequested { id, request } => {
                    asked.insert(id, request.clone());
                }
                RunEvent::ApprovalDecided { id, decision: Decision::Deny(reason), by } => {
                    if let Some(request) = asked.remove(&id) {
                        let denied = BindingError::new(catalogue::denied(reason));
                        let call = (request.namespace.as_str(), request.function.as_str());
                        // A full record file cannot end the run from a sink; the line is dropped.
                        let run = Some(request.run);
                        let _ = recorder.denied_in(run, call, &request.args, &denied, by);
                    }
                }
                RunEvent::ApprovalDecided { id, .. } => {
                    asked.remove(&id);
                }
                _ => {}
            }
        }))
    }

    /// Records a call the host denied (it never ran): its line has the denial as its `error`
    /// and the decision with who made it.
    ///
    /// # Errors
    ///
    /// [`RecordFull`], as [`Recording::finish`].
    pub fn denied(
        &self,
        call: (&str, &str),
        args: &Value,
        rejection: &BindingError,
        by: &str,
    ) -> Result<(), RecordFull> {
        self.denied_in(None, call, args, rejection, by)
    }

    /// [`denied`](Recorder::denied) for a call of `run`, whose lines never rotate the record
    /// twice, denials included.
    ///
    /// # Errors
    ///
    /// [`RecordFull`], as [`Recording::finish`].
    pub fn denied_in(
        &self,
        run: Option<u64>,
        (namespace, function): (&str, &str),
        args: &Value,
        rejection: &BindingError,
        by: &str,
    ) -> Result<(), RecordFull> {
        let Some(recording) = self.start_in(run, namespace, function, args) else { return Ok(()) };
        recording.approved("deny", by).finish(&Err(rejection.clone()))
    }

    /// The calls recorded so far by a [`keeping`](Recorder::keeping) recorder, in the order
    /// they settled, leaving none.
    pub fn take_records(&self) -> Vec<CallRecord> {
        let Some(inner) = &self.inner else { return Vec::new() };
        match &mut lock(inner).place {
            Place::Kept(records) => std::mem::take(records),
            Place::Written { .. } => Vec::new(),
        }
    }

    /// The first error writing a line, if one failed.
    pub fn write_error(&self) -> Option<String> {
        match &lock(self.inner.as_ref()?).place {
            Place::Written { error, .. } => error.clone(),
            Place::Kept(_) => None,
        }
    }
}

impl Recording {
    /// Notes the decision on a call that needed approval, and who made it.
    #[must_use]
    pub fn approved(mut self, decision: &str, by: &str) -> Self {
        if let Part::Line(line) = &mut self.part {
            approval(line, decision, by);
        }
        self.approval = Some((decision.to_owned(), by.to_owned()));
        self
    }

    /// Records how the call settled.
    ///
    /// # Errors
    ///
    /// [`RecordFull`] when the record file has no room for this line (or had none before): the
    /// line is not written, and the binding should end its run with
    /// [`RecordFull::into_binding_error`].
    pub fn finish(self, outcome: &Result<JsonValue, BindingError>) -> Result<(), RecordFull> {
        let mut inner = lock(&self.recorder);
        let started = self.started.saturating_duration_since(inner.origin);
        let duration = self.started.elapsed();
        match (&mut inner.place, self.part) {
            (Place::Kept(records), Part::Args(args)) => {
                let outcome = match outcome {
                    Ok(value) => Ok(value.clone()),
                    Err(error) => Err((error.message().to_owned(), error.data().cloned())),
                };
                let (namespace, function, approval) =
                    (self.namespace, self.function, self.approval);
                let record =
                    CallRecord { namespace, function, args, outcome, started, duration, approval };
                records.push(record);
                Ok(())
            }
            (
                Place::Written {
                    sink,
                    written,
                    max_bytes,
                    full,
                    error,
                    name,
                    rotation,
                    rotated_by,
                },
                Part::Line(mut line),
            ) => {
                let record_full = || RecordFull { max_bytes: *max_bytes, name: name.clone() };
                if *full {
                    return Err(record_full());
                }
                let outcome = match outcome {
                    Ok(value) => Ok(value),
                    Err(rejection) => Err((rejection.message(), rejection.data())),
                };
                tail(&mut line, outcome, started, duration);
                line.push('\n');
                let size = line.len() as u64;
                if written.saturating_add(size) > *max_bytes {
                    let again = self.run.is_some_and(|run| rotated_by.contains(&run));
                    match rotation {
                        // A run's second rotation would erase other runs' lines: refused for it.
                        Some(_) if again => return Err(record_full()),
                        Some(path) if size <= *max_bytes => match rotate(path) {
                            Ok(fresh) => {
                                *sink = Box::new(fresh);
                                *written = 0;
                                remember(rotated_by, self.run);
                            }
                            Err(failure) => {
                                error.get_or_insert_with(|| failure.to_string());
                                *full = true;
                                return Err(record_full());
                            }
                        },
                        // One line over the bound on its own: refused for its run only.
                        Some(_) => return Err(record_full()),
                        None => {
                            *full = true;
                            return Err(record_full());
                        }
                    }
                }
                *written += size;
                if let Err(failure) = sink.write_all(line.as_bytes()).and_then(|()| sink.flush()) {
                    error.get_or_insert_with(|| failure.to_string());
                }
                Ok(())
            }
            // A recording is made for the recorder's own place.
            (Place::Kept(_), Part::Line(_)) | (Place::Written { .. }, Part::Args(_)) => Ok(()),
        }
    }
}

/// Remembers that `run` made the record rotate, forgetting the oldest past [`ROTATIONS_KEPT`].
fn remember(rotated_by: &mut VecDeque<u64>, run: Option<u64>) {
    let Some(run) = run else { return };
    if rotated_by.len() == ROTATIONS_KEPT {
        rotated_by.pop_front();
    }
    rotated_by.push_back(run);
}

/// Moves the full record at `path` to `<path>.1` (replacing the one there) and starts a fresh
/// file at `path`.
fn rotate(path: &Path) -> std::io::Result<std::fs::File> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".1");
    std::fs::rename(path, &aside)?;
    private_file(path)
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A duration in milliseconds, to the microsecond, as a JSON number.
pub(crate) fn milliseconds(duration: Duration) -> String {
    let rounded = (duration.as_secs_f64() * 1e6).round() / 1e3;
    json::encode(&JsonValue::Number(json::number_from_f64(rounded).unwrap_or_else(|_| 0.into())))
}
