//! The messages a program sees that a substrate or the dispatcher produces, each written once.
//!
//! Messages that name a binding are templates with a `{binding}` placeholder (`global.name`) so
//! that a substrate in another language can fill them in: the Python child receives
//! [`SUBSTRATE_MESSAGES`] in its `boot` frame.

use crate::json;

/// What a program that threw something unrenderable sees (`exception`).
pub const UNRENDERABLE_EXCEPTION: &str = "program threw an unrenderable value";

/// A call whose argument is not lossless JSON: the call rejects and the host is never asked.
pub const LOSSY_ARGUMENTS: &str = "binding arguments must be lossless JSON";

/// A call with more than one positional argument: a `TypeError` at the call.
pub const TOO_MANY_ARGUMENTS: &str =
    "{binding}() takes one argument (a JSON value) but {count} were given";

/// A Python call mixing a positional argument and keyword arguments: a `TypeError` at the call.
pub const MIXED_ARGUMENTS: &str =
    "{binding}() takes one positional argument or keyword arguments, not both";

/// A Python call whose argument would not fit in one frame.
pub const ARGUMENTS_TOO_LARGE: &str = "binding arguments exceed the frame limit of {limit} bytes";

/// A TypeScript call whose argument, as JSON, is larger than the run's memory budget.
pub const ARGUMENTS_OVER_BUDGET: &str =
    "binding arguments exceed the memory budget of {limit} bytes";

/// A call made while the calls in flight already hold the run's memory budget (a program that
/// calls in a loop without awaiting): the call rejects, the program may catch it.
pub const CALLS_OVER_BUDGET: &str =
    "too many binding calls in flight: their arguments exceed the run's memory budget";

/// A resolution nested more deeply than the Python child can parse.
pub const RESOLUTION_TOO_DEEP: &str = "binding resolution is nested too deeply";

/// A call with more positional arguments than its input schema has properties: a `TypeError` at
/// the call ([`BindingFunction::parameters`](crate::BindingFunction::parameters)).
pub const TOO_MANY_POSITIONAL: &str =
    "{binding}() takes at most {limit} positional arguments ({names}) but {count} were given";

/// A Python call that gives one argument both by position and by keyword.
pub const DUPLICATE_ARGUMENT: &str = "{binding}() got multiple values for argument '{name}'";

/// A Python binding call used as a value without `await` (printed, tested, measured, indexed,
/// iterated): a `TypeError` at that use. The call itself was made.
pub const NOT_AWAITED: &str = "{binding}(...) was not awaited: write `await {binding}(...)`";

/// `call_tool` with a name no function has: a `TypeError` at the call. `{tools}` is
/// [`ToolIndex::listing`](crate::provider::ToolIndex::listing).
pub const UNKNOWN_TOOL: &str = "call_tool() has no tool {name}; the tools are: {tools}";

/// `call_tool` whose first argument is not a string: a `TypeError` at the call.
pub const TOOL_NAME: &str =
    "call_tool() takes the tool's name first, as a string (\"namespace.function\" or \"function\")";

/// The templates a substrate outside this process fills in itself, by key.
pub const SUBSTRATE_MESSAGES: [(&str, &str); 11] = [
    ("unrenderable", UNRENDERABLE_EXCEPTION),
    ("lossyArguments", LOSSY_ARGUMENTS),
    ("tooManyArguments", TOO_MANY_ARGUMENTS),
    ("mixedArguments", MIXED_ARGUMENTS),
    ("argumentsTooLarge", ARGUMENTS_TOO_LARGE),
    ("resolutionTooDeep", RESOLUTION_TOO_DEEP),
    ("notAwaited", NOT_AWAITED),
    ("tooManyPositional", TOO_MANY_POSITIONAL),
    ("duplicateArgument", DUPLICATE_ARGUMENT),
    ("unknownTool", UNKNOWN_TOOL),
    ("toolName", TOOL_NAME),
];

/// [`UNKNOWN_TOOL`] filled in; the name is JSON-quoted, cut to 200 bytes.
pub fn unknown_tool(name: &str, tools: &str) -> String {
    let name = json::quote(json::truncate(name, 200));
    fill(UNKNOWN_TOOL, &[("name", &name), ("tools", tools)])
}

/// `template` with each `{key}` replaced in one pass, so a substituted text that itself holds a
/// placeholder (a tool named `{tools}`) stays as it is.
fn fill(template: &str, substitutions: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let known = after.find('}').and_then(|close| {
            let key = &after[..close];
            let (_, value) = substitutions.iter().find(|(name, _)| *name == key)?;
            Some((*value, close))
        });
        match known {
            Some((value, close)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// [`TOO_MANY_ARGUMENTS`] filled in.
pub fn too_many_arguments(label: &str, count: usize) -> String {
    TOO_MANY_ARGUMENTS.replace("{binding}", label).replace("{count}", &count.to_string())
}

/// [`TOO_MANY_POSITIONAL`] filled in.
pub fn too_many_positional(label: &str, names: &[String], count: usize) -> String {
    TOO_MANY_POSITIONAL
        .replace("{binding}", label)
        .replace("{limit}", &names.len().to_string())
        .replace("{names}", &names.join(", "))
        .replace("{count}", &count.to_string())
}

/// [`ARGUMENTS_OVER_BUDGET`] filled in.
pub fn arguments_over_budget(limit: usize) -> String {
    ARGUMENTS_OVER_BUDGET.replace("{limit}", &limit.to_string())
}

/// A resolution that is not lossless JSON, naming the binding and why.
pub fn lossy_resolution(label: &str, why: &str) -> String {
    format!(
        "binding {} resolved with a value that is not lossless JSON ({why})",
        json::quote(label)
    )
}

/// A host closure that panicked.
pub fn panicked(label: &str) -> String {
    format!("binding {} panicked", json::quote(label))
}

/// The most of a program's chosen name a message quotes, in JSON bytes: a forged call can name
/// a function with megabytes.
const NAME_BYTES: usize = 200;

/// `label` quoted, cut at [`NAME_BYTES`] with `…`.
fn quoted_name(label: &str) -> String {
    let kept = json::truncate(label, NAME_BYTES);
    if kept.len() == label.len() { json::quote(label) } else { json::quote(&format!("{kept}…")) }
}

/// A call of a name the request does not declare (only a forged call can make one).
pub fn unknown_binding(label: &str) -> String {
    format!("unknown binding {}", quoted_name(label))
}

/// A call over the run's budget of calls in all ([`Limits::max_calls`](crate::Limits::max_calls)).
pub fn calls_exhausted(label: &str, limit: u64) -> String {
    format!(
        "binding {} was not called: this run may make at most {limit} binding calls",
        quoted_name(label)
    )
}

/// A call over the run's budget of calls to one function
/// ([`Limits::max_calls_per_function`](crate::Limits::max_calls_per_function)).
pub fn function_calls_exhausted(label: &str, limit: u64) -> String {
    let label = json::quote(label);
    let times = if limit == 1 { "once" } else { &format!("{limit} times") };
    format!("binding {label} was not called: this run may call it at most {times}")
}

/// A call whose argument does not match its function's input schema
/// ([`BindingFunction::validate_input`](crate::BindingFunction::validate_input)): `path` is the
/// JSON Pointer of the first failing value (empty for the argument itself), `detail` the
/// validator's explanation.
pub fn argument_mismatch(label: &str, path: &str, detail: &str) -> String {
    let at = if path.is_empty() { String::new() } else { format!(" at {path}") };
    format!(
        "binding {} was not called: its argument{at} does not match its schema: {detail}",
        json::quote(label)
    )
}

/// A call whose argument the check of its input schema could not judge (a `pattern` gave up).
pub fn argument_undecided(label: &str, path: &str, detail: &str) -> String {
    let at = if path.is_empty() { String::new() } else { format!(" at {path}") };
    format!(
        "binding {} was not called: its argument{at} could not be checked against its schema (a pattern gave up: {detail})",
        json::quote(label)
    )
}

/// A call whose argument is nested too deeply to check against its input schema.
pub fn argument_too_deep(label: &str, limit: usize) -> String {
    format!(
        "binding {} was not called: its argument nests more than {limit} levels deep, too deep to check against its schema",
        json::quote(label)
    )
}

/// The hint after an exception that names a host API or module the program cannot have here
/// (`ReferenceError: fs is not defined`, `ModuleNotFoundError: No module named 'requests'`).
pub fn no_host_api(name: &str, bindings: &str) -> String {
    format!(
        "hint: there is no {name} here: the program runs in a sandbox without files, network or \
         host APIs, and reaches the outside only through its bindings: {bindings}"
    )
}

/// A call the host did not approve: the call rejects with the namespace's error class; the
/// program may catch it.
pub fn denied(reason: &str) -> String {
    format!("denied: {reason}")
}

/// The reason of a denial no approver made: the request has no [`Approvals`](crate::Approvals).
pub const NO_APPROVER: &str = "no approver";

/// The reason of a denial when the approver did not decide within its timeout.
pub const NO_DECISION: &str = "no decision";

/// The reason of a denial when the approver panicked.
pub const APPROVER_FAILED: &str = "the approver failed";

/// The reason of a denial when the approver paused a run that has no checkpoint key.
pub const CANNOT_PAUSE: &str = "this run cannot pause";

/// A resumed program that made another call than the checkpoint holds at number `call`
/// (`exception`).
pub fn diverged(call: u64, was: &str, now: &str) -> String {
    format!("the program took another path on resume: call {call} was {was}, now {now}")
}
