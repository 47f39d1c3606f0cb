//! `--bindings FILE`: namespaces whose functions are canned behaviours or external commands, and
//! `--record FILE`: one JSON line per call.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runtime::json::{self, JsonValue};
use code_runtime::{BindingError, CodeBindingNamespace, binding};

/// How long a `command` binding may run before its call is rejected.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Where calls are recorded, shared by every binding of a run.
#[derive(Clone, Default)]
pub struct Recorder {
    lines: Option<Arc<Mutex<Vec<String>>>>,
    start: Option<Instant>,
}

impl Recorder {
    /// A recorder that keeps lines only when `enabled`.
    pub fn new(enabled: bool) -> Self {
        Self { lines: enabled.then(Arc::default), start: Some(Instant::now()) }
    }

    fn enabled(&self) -> bool {
        self.lines.is_some()
    }

    /// Records one call; `args` is the argument already encoded (values may be deep, so nothing
    /// here clones or serializes them recursively).
    fn record(
        &self,
        namespace: &str,
        function: &str,
        args: &str,
        outcome: &Result<JsonValue, BindingError>,
        started: Instant,
    ) {
        let Some(lines) = &self.lines else { return };
        let origin = self.start.unwrap_or(started);
        let mut line = format!(
            "{{\"namespace\":{},\"function\":{},\"args\":{args},",
            json::quote(namespace),
            json::quote(function)
        );
        match outcome {
            Ok(value) => {
                line.push_str("\"ok\":");
                json::encode_into(value, &mut line);
            }
            Err(error) => {
                line.push_str("\"error\":");
                line.push_str(&json::quote(error.message()));
            }
        }
        let started_ms = started.duration_since(origin).as_secs_f64() * 1e3;
        let duration_ms = started.elapsed().as_secs_f64() * 1e3;
        line.push_str(&format!(
            ",\"startedMs\":{},\"durationMs\":{}}}",
            number(started_ms),
            number(duration_ms)
        ));
        if let Ok(mut lines) = lines.lock() {
            lines.push(line);
        }
    }

    /// The recorded lines, each a JSON object.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .as_ref()
            .and_then(|lines| lines.lock().ok().map(|lines| lines.clone()))
            .unwrap_or_default()
    }
}

/// Reads a bindings file into namespaces.
///
/// # Errors
///
/// A one-line message for an unreadable file or one that does not follow the format.
pub fn load(path: &Path, recorder: &Recorder) -> Result<Vec<CodeBindingNamespace>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let file = json::parse(&text)
        .map_err(|error| format!("{} is not lossless JSON: {error}", path.display()))?;
    from_json(&file, &path.display().to_string(), recorder)
}

/// Builds namespaces from a parsed bindings document; `origin` names it in error messages.
///
/// # Errors
///
/// A one-line message when the document does not follow the format.
pub fn from_json(
    file: &JsonValue,
    origin: &str,
    recorder: &Recorder,
) -> Result<Vec<CodeBindingNamespace>, String> {
    let invalid = |why: &str| format!("{origin}: {why}");
    let namespaces = file
        .get("namespaces")
        .and_then(JsonValue::as_array)
        .ok_or_else(|| invalid("expected {\"namespaces\": [...]}"))?;
    let mut out = Vec::new();
    for declared in namespaces {
        let global = declared
            .get("global")
            .and_then(JsonValue::as_str)
            .ok_or_else(|| invalid("a namespace needs a string \"global\""))?;
        let mut namespace = CodeBindingNamespace::new(global);
        if let Some(class) = declared.get("errorClass") {
            let name = class
                .get("name")
                .and_then(JsonValue::as_str)
                .ok_or_else(|| invalid("errorClass needs a string \"name\""))?;
            let member = class
                .get("memberNameProperty")
                .and_then(JsonValue::as_str)
                .ok_or_else(|| invalid("errorClass needs a string \"memberNameProperty\""))?;
            namespace = namespace.error_class(name, member);
        }
        let functions = declared
            .get("functions")
            .and_then(JsonValue::as_object)
            .ok_or_else(|| invalid("a namespace needs an object \"functions\""))?;
        for (name, behaviour) in functions {
            let behaviour = Behaviour::parse(behaviour)
                .map_err(|why| invalid(&format!("function {}: {why}", json::quote(name))))?;
            let (recorder, global, function) = (recorder.clone(), global.to_owned(), name.clone());
            namespace = namespace.function(
                name.clone(),
                binding(move |args| {
                    let (behaviour, recorder, global, function) =
                        (behaviour.clone(), recorder.clone(), global.clone(), function.clone());
                    async move {
                        let started = Instant::now();
                        let encoded =
                            if recorder.enabled() { json::encode(&args) } else { String::new() };
                        let outcome = behaviour.call(args).await;
                        recorder.record(&global, &function, &encoded, &outcome, started);
                        outcome
                    }
                }),
            );
        }
        out.push(namespace);
    }
    Ok(out)
}

#[derive(Clone, Debug)]
enum Action {
    Echo,
    Reply(JsonValue),
    Reject(String),
    Command(Vec<String>),
}

#[derive(Clone, Debug)]
struct Behaviour {
    action: Action,
    delay: Duration,
}

impl Behaviour {
    fn parse(value: &JsonValue) -> Result<Self, String> {
        let object = value.as_object().ok_or("expected an object such as {\"echo\": true}")?;
        let delay = match object.get("delayMs") {
            None => Duration::ZERO,
            Some(ms) => {
                Duration::from_millis(ms.as_u64().ok_or("delayMs must be a non-negative integer")?)
            }
        };
        let action = if object.get("echo") == Some(&JsonValue::Bool(true)) {
            Action::Echo
        } else if let Some(reply) = object.get("reply") {
            Action::Reply(reply.clone())
        } else if let Some(message) = object.get("reject") {
            Action::Reject(message.as_str().ok_or("reject must be a string")?.to_owned())
        } else if let Some(command) = object.get("command") {
            let argv: Option<Vec<String>> = command
                .as_array()
                .map(|items| items.iter().map(|item| item.as_str().map(str::to_owned)).collect())
                .unwrap_or(None);
            match argv {
                Some(argv) if !argv.is_empty() => Action::Command(argv),
                _ => return Err("command must be a non-empty array of strings".to_owned()),
            }
        } else {
            return Err("expected one of echo, reply, reject, command".to_owned());
        };
        Ok(Self { action, delay })
    }

    async fn call(&self, args: JsonValue) -> Result<JsonValue, BindingError> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let outcome = match &self.action {
            Action::Echo => return Ok(args),
            // A copy without recursion: the reply may nest deeply.
            Action::Reply(value) => json::parse(&json::encode(value))
                .map_err(|error| BindingError::new(error.to_string())),
            Action::Reject(message) => Err(BindingError::new(message.clone())),
            Action::Command(argv) => run_command(argv, &args).await,
        };
        json::drop_value(args);
        outcome
    }
}

/// Runs a `command` binding: the argument as JSON on stdin, the resolution as JSON on stdout; a
/// non-zero exit, a timeout or output that is not JSON rejects the call. The command starts with
/// an empty environment (bar `PATH`) so it sees no secret of the host's.
async fn run_command(argv: &[String], args: &JsonValue) -> Result<JsonValue, BindingError> {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;

    #[expect(
        clippy::disallowed_methods,
        reason = "a user-declared binding command, not a Python child"
    )]
    let mut command = tokio::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    let mut child = command
        .spawn()
        .map_err(|error| BindingError::new(format!("cannot start {}: {error}", argv[0])))?;
    if let Some(mut stdin) = child.stdin.take() {
        let input = json::encode(args);
        // A command that does not read its input may close stdin early; that is its business.
        let _ = stdin.write_all(input.as_bytes()).await;
    }
    let output = match tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(BindingError::new(format!("{} failed: {error}", argv[0]))),
        Err(_) => {
            return Err(BindingError::new(format!(
                "{} timed out after {} s",
                argv[0],
                COMMAND_TIMEOUT.as_secs()
            )));
        }
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        return Err(BindingError::new(if stderr.is_empty() {
            format!("{} exited with {}", argv[0], output.status)
        } else {
            stderr
        }));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    json::parse(stdout.trim()).map_err(|error| {
        BindingError::new(format!("{} printed no lossless JSON: {error}", argv[0]))
    })
}

/// A duration in milliseconds, as a JSON number (three decimals).
fn number(ms: f64) -> String {
    let rounded = (ms * 1e3).round() / 1e3;
    json::encode(&JsonValue::Number(
        json::number_from_f64(rounded.max(0.0)).unwrap_or_else(|_| 0.into()),
    ))
}
