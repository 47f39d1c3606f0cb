//! Hints on failures a model makes because it was prompted for another runtime: a program that
//! reaches for a host API (`fs`, `process`, `require`, `fetch`, Python's `requests`) fails with
//! the engine's own words, plus one line that says there is no such thing here and what the
//! program can call instead. The host loop adds it to every `exception`, whatever the language.

use crate::provider::{BindingTable, Ending, catalogue};

/// Host APIs a TypeScript program may expect from Node, Deno or a browser.
const SCRIPT_HOST_APIS: [&str; 12] = [
    "fs",
    "process",
    "require",
    "Buffer",
    "fetch",
    "module",
    "exports",
    "__dirname",
    "XMLHttpRequest",
    "window",
    "document",
    "Deno",
];

/// Modules a Python program may expect to be installed or to reach the network with.
const PYTHON_HOST_MODULES: [&str; 6] =
    ["requests", "httpx", "aiohttp", "urllib3", "boto3", "openai"];

/// At most this many bindings are listed in a hint.
const LISTED: usize = 12;

/// `ending`, with a hint appended to an exception that names a host API the program cannot have.
pub(crate) fn explained(ending: Ending, table: &BindingTable) -> Ending {
    match ending {
        Ending::Threw(text) => match missing_host_api(&text) {
            Some(name) => {
                let hint = catalogue::no_host_api(name, &listed(table));
                Ending::Threw(format!("{text}\n{hint}"))
            }
            None => Ending::Threw(text),
        },
        other => other,
    }
}

/// The host API an exception's text says is missing: V8's `ReferenceError: fs is not defined`
/// on its first line, or Python's `NameError: name 'requests' is not defined` /
/// `ModuleNotFoundError: No module named 'requests'` on its last.
fn missing_host_api(text: &str) -> Option<&'static str> {
    let first = text.lines().next().unwrap_or_default();
    if let Some(name) =
        first.strip_prefix("ReferenceError: ").and_then(|rest| rest.strip_suffix(" is not defined"))
    {
        return SCRIPT_HOST_APIS.iter().copied().find(|api| *api == name);
    }
    let last = text.lines().next_back().unwrap_or_default();
    let quoted = last
        .strip_prefix("NameError: name '")
        .and_then(|rest| rest.strip_suffix("' is not defined"))
        .or_else(|| {
            last.strip_prefix("ModuleNotFoundError: No module named '")?.strip_suffix('\'')
        })?;
    // `import requests.adapters` names the package first.
    let package = quoted.split('.').next().unwrap_or(quoted);
    PYTHON_HOST_MODULES.iter().copied().find(|module| *module == package)
}

/// `tools.search, tools.fetch, …` (the first [`LISTED`]), or `none` for a run without bindings.
fn listed(table: &BindingTable) -> String {
    let names: Vec<&str> = (0..table.len())
        .filter_map(|index| {
            table.label(crate::provider::FunctionId::new(u32::try_from(index).ok()?))
        })
        .collect();
    match names.len() {
        0 => "none".to_owned(),
        n if n <= LISTED => names.join(", "),
        n => format!("{}, and {} more", names[..LISTED].join(", "), n - LISTED),
    }
}
