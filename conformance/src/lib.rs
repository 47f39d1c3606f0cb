//! The conformance runner: every case under `conformance/cases/<suite>/` runs through a provider's
//! `CodeRuntime` trait object and is rendered as a stable Markdown report, which the suite's test
//! snapshots with insta and checks against the suite's expectation.
//!
//! A case is a program file, `<name>.ts` or `<name>.py`, and an optional sidecar `<name>.json`:
//!
//! ```json
//! {"bindings": {"namespaces": [...]}, "limits": {"maxOutputBytes": 64}, "expect": "..."}
//! ```
//!
//! `bindings` is the command line's bindings-file format (docs/cli.md), `limits` its limits-file format;
//! both are read by `code-runtime-fixtures`, as the command line reads them.
//! A case that exists in both languages (same suite, same name) is a parity case: both providers must
//! produce the same logs, value and error kind, and the same message unless the kind is `exception`
//! (a stack trace and a traceback are spelled differently).

use std::path::{Path, PathBuf};

use code_runtime::json::{self, JsonValue};
use code_runtime::{CodeRunResult, FailureKind, Language, Limits};
use code_runtime_fixtures::{BindingsFile, CallRecord, LimitsFile, Recorder, bindings_from_json};
use code_runtime_providers::ProviderSpec;

/// The suites, named by what their cases must do.
pub const SUITES: [&str; 7] =
    ["ok", "throws", "limits", "bindings", "hostile", "misuse", "conventions"];

/// One case file.
#[derive(Clone, Debug)]
pub struct Case {
    /// `ok`, `throws`, ...
    pub suite: String,
    /// The file name without extension.
    pub name: String,
    /// `typescript` or `python`.
    pub language: &'static str,
    /// The program file.
    pub path: PathBuf,
}

/// What one case did.
#[derive(Debug)]
pub struct CaseRun {
    /// The run's result, or the contract error's message.
    pub result: Result<CodeRunResult, String>,
    /// Every binding call, in the order they settled.
    pub calls: Vec<CallRecord>,
}

/// The cases directory of this repository.
pub fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cases")
}

/// Where the reports are snapshotted, one directory per language.
pub fn snapshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots")
}

/// Every case, sorted by suite, name and language.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for suite in SUITES {
        let Ok(entries) = std::fs::read_dir(cases_dir().join(suite)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let language = match path.extension().and_then(|ext| ext.to_str()) {
                Some("ts") => "typescript",
                Some("py") => "python",
                _ => continue,
            };
            let name =
                path.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default().to_owned();
            cases.push(Case { suite: suite.to_owned(), name, language, path });
        }
    }
    cases.sort_by(|a, b| (&a.suite, &a.name, a.language).cmp(&(&b.suite, &b.name, b.language)));
    cases
}

/// Where a TypeScript case runs: in the test's process, or in sandbox cells of the named cell
/// executable (one that calls `code_runtime_worker_thread::serve_cell_if_asked` first).
#[derive(Clone, Debug)]
pub enum Isolation {
    /// `thread` isolation.
    Thread,
    /// `process` isolation, cells running this executable.
    Process(PathBuf),
}

/// Runs one case on a fresh provider of its language, configured by its sidecar; a TypeScript
/// case in `isolation`.
pub async fn run(case: &Case, isolation: &Isolation) -> CaseRun {
    let sidecar = case.path.with_extension("json");
    let sidecar = if sidecar.exists() {
        code_runtime_fixtures::read_document(&sidecar).unwrap_or_else(|error| panic!("{error}"))
    } else {
        JsonValue::Object(Default::default())
    };
    let limits = match sidecar.get("limits") {
        Some(document) => LimitsFile::from_json(document, &case.name)
            .unwrap_or_else(|error| panic!("{error}"))
            .apply(Limits::default()),
        None => Limits::default(),
    };
    let recorder = Recorder::keeping();
    let bindings = match sidecar.get("bindings") {
        Some(document) => bindings_from_json(document, &case.name, &recorder)
            .unwrap_or_else(|error| panic!("{error}")),
        None => BindingsFile::default(),
    };
    let language = case.language.parse().expect("a case's language");
    let (isolation, cell_executable) = match (language, isolation) {
        (Language::Python, _) => (None, None),
        (_, Isolation::Thread) => (Some(code_runtime::Isolation::Thread), None),
        (_, Isolation::Process(executable)) => {
            (Some(code_runtime::Isolation::Process), Some(executable.clone()))
        }
    };
    let spec = ProviderSpec {
        isolation,
        limits,
        cell_executable,
        // One run per provider: a substrate started ahead would only be thrown away.
        warm: false,
        ..ProviderSpec::new(language)
    };
    let runtime =
        spec.build().unwrap_or_else(|error| panic!("the provider starts: {error}")).runtime;
    let program = std::fs::read_to_string(&case.path).expect("readable case");
    let request = bindings.request(program);
    let result = runtime.run(request).await.map_err(|error| error.to_string());
    runtime.dispose().await;
    CaseRun { result, calls: recorder.take_records() }
}

/// A call as the report shows it: `--record`'s fields without the timings.
fn call_line(call: &CallRecord) -> String {
    let mut line = format!(
        "{{\"namespace\":{},\"function\":{},\"args\":{},",
        json::quote(&call.namespace),
        json::quote(&call.function),
        json::encode(&call.args)
    );
    match &call.outcome {
        Ok(value) => line.push_str(&format!("\"ok\":{}}}", json::encode(value))),
        Err((message, None)) => line.push_str(&format!("\"error\":{}}}", json::quote(message))),
        Err((message, Some(data))) => line.push_str(&format!(
            "\"error\":{},\"data\":{}}}",
            json::quote(message),
            json::encode(data)
        )),
    }
    line
}

/// The stable Markdown report of a case's run.
pub fn report(case: &Case, outcome: &CaseRun) -> String {
    let mut out = format!("# {}/{} ({})\n\n## Outcome\n\n", case.suite, case.name, case.language);
    match &outcome.result {
        Err(misuse) => out.push_str(&format!("misuse\n\n## Error\n\n{misuse}\n")),
        Ok(result) => {
            match result.error() {
                None => out.push_str("completed\n"),
                Some(error) => out.push_str(&format!("failed: {}\n", error.kind())),
            }
            if let Some(value) = result.value() {
                out.push_str(&format!("\n## Value\n\n```json\n{}\n```\n", json::encode(value)));
            }
            if !result.logs().is_empty() {
                out.push_str("\n## Logs\n\n");
                for log in result.logs() {
                    out.push_str(&format!("- {}\n", json::quote(log)));
                }
            }
            if let Some(error) = result.error() {
                out.push_str(&format!("\n## Error\n\n```text\n{}\n```\n", error.message()));
            }
        }
    }
    if !outcome.calls.is_empty() {
        // Sorted: concurrent calls complete in an order no case should depend on.
        let mut calls: Vec<String> = outcome.calls.iter().map(call_line).collect();
        calls.sort();
        out.push_str("\n## Binding calls (sorted)\n\n");
        for call in &calls {
            out.push_str(&format!("- `{call}`\n"));
        }
    }
    out
}

/// Whether `outcome` is what `suite` promises; `Err` says why not.
pub fn check_expectation(suite: &str, outcome: &CaseRun) -> Result<(), String> {
    let kind = outcome.result.as_ref().ok().map(|result| result.error().map(|error| error.kind()));
    match (suite, kind) {
        ("ok", Some(None)) => Ok(()),
        ("throws", Some(Some(FailureKind::Exception))) => Ok(()),
        (
            "limits",
            Some(Some(
                FailureKind::Timeout
                | FailureKind::OutputLimit
                | FailureKind::WorkerExit
                | FailureKind::InvalidOutput,
            )),
        ) => Ok(()),
        ("bindings" | "hostile", Some(_)) => Ok(()),
        ("misuse", None) => Ok(()),
        // Programs in the shapes other code-mode systems prompt for: each gives its value, or
        // fails with a clear error; none completes silently with nothing.
        ("conventions", Some(Some(_))) => Ok(()),
        ("conventions", Some(None))
            if outcome.result.as_ref().is_ok_and(|result| result.value().is_some()) =>
        {
            Ok(())
        }
        (suite, kind) => Err(format!("a case in {suite}/ ended as {kind:?}")),
    }
}

/// What two languages must agree on: logs, value, error kind, and the message unless the kind is
/// `exception`.
pub fn parity_view(outcome: &CaseRun) -> String {
    match &outcome.result {
        Err(misuse) => format!("misuse: {misuse}"),
        Ok(result) => {
            let error = result.error().map(|error| match error.kind() {
                FailureKind::Exception => "exception".to_owned(),
                kind => format!("{kind}: {}", error.message()),
            });
            format!(
                "logs {:?}\nvalue {:?}\nerror {:?}",
                result.logs(),
                result.value().map(json::encode),
                error
            )
        }
    }
}
