//! The bindings file of the command line: namespaces whose functions are canned behaviours or
//! external commands.

use std::path::Path;
use std::time::Duration;

use code_runtime::json::{self, JsonValue};
use code_runtime::provider::MAX_VALUE_DEPTH;
use code_runtime::{
    ApprovalRule, BindingArgs, BindingError, BindingFunction, CodeBindingNamespace, CodeRunRequest,
    binding,
};
use indexmap::IndexMap;

use crate::command::{DEFAULT_COMMAND_TIMEOUT, run_command};
use crate::{FixtureError, Recorder, read_document};

/// What a bindings file gives a program: namespaces, values, and whether it has `call_tool`.
#[derive(Debug, Default)]
pub struct BindingsFile {
    /// The namespaces, in file order.
    pub namespaces: Vec<CodeBindingNamespace>,
    /// `"values"`: the globals the program reads ([`CodeRunRequest::values`]).
    pub values: IndexMap<String, JsonValue>,
    /// `"callTool": true` ([`CodeRunRequest::call_tool`]).
    pub call_tool: bool,
}

impl BindingsFile {
    /// A request for `program` with these bindings, values and `call_tool`.
    pub fn request(self, program: String) -> CodeRunRequest {
        CodeRunRequest {
            program,
            bindings: self.namespaces,
            values: self.values,
            call_tool: self.call_tool,
            ..CodeRunRequest::default()
        }
    }
}

/// Reads a bindings file into namespaces whose calls `recorder` records.
///
/// # Errors
///
/// A [`FixtureError`] for an unreadable file or one that does not follow the format.
pub fn load_bindings(path: &Path, recorder: &Recorder) -> Result<BindingsFile, FixtureError> {
    bindings_from_json(&read_document(path)?, &path.display().to_string(), recorder)
}

/// Builds namespaces from a parsed bindings document; `origin` names it in errors.
///
/// ```json
/// {"namespaces": [{"global": "tools",
///                  "errorClass": {"name": "ToolCallError", "memberNameProperty": "toolName"},
///                  "globals": true,
///                  "functions": {"search": {"echo": true, "delayMs": 5}}}],
///  "values": {"accountId": "acct-1"},
///  "callTool": true}
/// ```
///
/// `"globals": true` on a namespace makes each of its functions a bare global too
/// ([`CodeBindingNamespace::functions_as_globals`]); `"values"` are globals the program reads;
/// `"callTool": true` gives the program `call_tool(name, args)`.
///
/// A behaviour is `{"echo": true}`, `{"reply": <json>}`, `{"reject": "<message>"}` (with an
/// optional `"data": <json>` the program reads as `e.data`) or `{"command": ["prog", "arg"]}`
/// (with an optional `"timeoutMs": N` for the whole exchange, default 30 000), each with an
/// optional `"delayMs": N`. A function may add `"description"`, `"input"` and `"output"` (JSON
/// Schemas) and `"validate": true` (check each call's argument against `input`); a namespace may
/// add `"description"` and `"validate": true` (for each of its functions that has an `input` and
/// no `validate` of its own).
///
/// # Errors
///
/// A [`FixtureError`] naming what does not follow the format; unknown keys are errors too.
pub fn bindings_from_json(
    document: &JsonValue,
    origin: &str,
    recorder: &Recorder,
) -> Result<BindingsFile, FixtureError> {
    let invalid = |why: &str| FixtureError::new(format!("{origin}: {why}"));
    let object = document.as_object().ok_or_else(|| invalid("expected {\"namespaces\": [...]}"))?;
    if let Some(key) =
        object.keys().find(|key| !["namespaces", "values", "callTool"].contains(&key.as_str()))
    {
        return Err(invalid(&format!("unknown key {}", json::quote(key))));
    }
    let namespaces = object
        .get("namespaces")
        .and_then(JsonValue::as_array)
        .ok_or_else(|| invalid("expected {\"namespaces\": [...]}"))?
        .iter()
        .map(|declared| namespace(declared, recorder).map_err(|why| invalid(&why)))
        .collect::<Result<_, _>>()?;
    let values = match object.get("values") {
        None => IndexMap::new(),
        Some(JsonValue::Object(values)) => values
            .iter()
            // A copy without recursion: a value may nest deeply.
            .map(|(name, value)| Ok((name.clone(), value.clone())))
            .collect::<Result<_, json::ParseError>>()
            .map_err(|error| invalid(&format!("values: {error}")))?,
        Some(_) => return Err(invalid("values must be an object of name to JSON value")),
    };
    let call_tool = match object.get("callTool") {
        None => false,
        Some(JsonValue::Bool(call_tool)) => *call_tool,
        Some(_) => return Err(invalid("callTool must be a boolean")),
    };
    Ok(BindingsFile { namespaces, values, call_tool })
}

fn namespace(declared: &JsonValue, recorder: &Recorder) -> Result<CodeBindingNamespace, String> {
    let object = declared.as_object().ok_or("a namespace must be an object")?;
    if let Some(key) = object.keys().find(|key| {
        !["global", "description", "errorClass", "functions", "validate", "globals"]
            .contains(&key.as_str())
    }) {
        return Err(format!("unknown namespace key {}", json::quote(key)));
    }
    let global = object
        .get("global")
        .and_then(JsonValue::as_str)
        .ok_or("a namespace needs a string \"global\"")?;
    let mut namespace = CodeBindingNamespace::new(global);
    // `"validate": true` on a namespace checks every function of it that has an input schema.
    let validate_all = match object.get("validate") {
        None => false,
        Some(JsonValue::Bool(validate)) => *validate,
        Some(_) => return Err("a namespace's validate must be a boolean".to_owned()),
    };
    match object.get("globals") {
        None | Some(JsonValue::Bool(false)) => {}
        Some(JsonValue::Bool(true)) => namespace = namespace.functions_as_globals(),
        Some(_) => return Err("a namespace's globals must be a boolean".to_owned()),
    }
    match object.get("description") {
        None => {}
        Some(JsonValue::String(text)) => namespace = namespace.description(text.clone()),
        Some(_) => return Err("a namespace's description must be a string".to_owned()),
    }
    if let Some(class) = object.get("errorClass") {
        let field = |name: &str| class.get(name).and_then(JsonValue::as_str);
        let (Some(name), Some(member)) = (field("name"), field("memberNameProperty")) else {
            return Err(
                "errorClass needs a string \"name\" and a string \"memberNameProperty\"".to_owned()
            );
        };
        namespace = namespace.error_class(name, member);
    }
    let functions = object
        .get("functions")
        .and_then(JsonValue::as_object)
        .ok_or("a namespace needs an object \"functions\"")?;
    for (name, behaviour) in functions {
        let behaviour = Behaviour::parse(behaviour)
            .map_err(|why| format!("function {}: {why}", json::quote(name)))?;
        let mut signature = Signature::parse(functions.get(name).unwrap_or(&JsonValue::Null))
            .map_err(|why| format!("function {}: {why}", json::quote(name)))?;
        // A function's own `validate` wins over its namespace's.
        if signature.validate.is_none() {
            signature.validate = Some(validate_all && signature.input.is_some());
        }
        let (recorder, global, function) = (recorder.clone(), global.to_owned(), name.clone());
        let callable = binding(move |args| {
            let (behaviour, recorder) = (behaviour.clone(), recorder.clone());
            let (global, function) = (global.clone(), function.clone());
            async move {
                let recording = recorder.start_call(&global, &function, &args);
                let outcome = behaviour.call(args).await;
                match recording.map(|recording| recording.finish(&outcome)) {
                    Some(Err(full)) => Err(full.into_binding_error()),
                    _ => outcome,
                }
            }
        });
        namespace = namespace.function(name.clone(), signature.apply(callable));
    }
    Ok(namespace)
}

/// What a bindings file tells the model about a function: `description`, and the JSON Schemas
/// `input` and `output` (an object or a boolean each); and `validate`, whether calls are checked
/// against `input`.
/// What a function's `"approval"` may be.
const APPROVAL_SHAPE: &str =
    "approval must be true, false or {\"when\": <JSON Schema the argument must match>}";

#[derive(Default)]
struct Signature {
    description: Option<String>,
    input: Option<JsonValue>,
    output: Option<JsonValue>,
    validate: Option<bool>,
    approval: Option<ApprovalRule>,
}

impl Signature {
    fn parse(declared: &JsonValue) -> Result<Self, String> {
        let mut signature = Self::default();
        match declared.get("description") {
            None => {}
            Some(JsonValue::String(text)) => signature.description = Some(text.clone()),
            Some(_) => return Err("description must be a string".to_owned()),
        }
        match declared.get("validate") {
            None => {}
            Some(JsonValue::Bool(validate)) => signature.validate = Some(*validate),
            Some(_) => return Err("validate must be a boolean".to_owned()),
        }
        for (key, slot) in [("input", &mut signature.input), ("output", &mut signature.output)] {
            match declared.get(key) {
                None => {}
                // A schema is read for declarations and checks within the serde depth; deeper
                // than that it is a mistake in the file.
                Some(schema) if json::nests_deeper_than(schema, json::SERDE_DEPTH) => {
                    return Err(format!("{key} nests more than {} levels deep", json::SERDE_DEPTH));
                }
                Some(schema @ (JsonValue::Object(_) | JsonValue::Bool(_))) => {
                    *slot = Some(schema.clone());
                }
                Some(_) => {
                    return Err(format!("{key} must be a JSON Schema (an object or a boolean)"));
                }
            }
        }
        signature.approval = match declared.get("approval") {
            None | Some(JsonValue::Bool(false)) => None,
            Some(JsonValue::Bool(true)) => Some(ApprovalRule::Always),
            Some(JsonValue::Object(rule)) => match (rule.len(), rule.get("when")) {
                (1, Some(schema)) if json::nests_deeper_than(schema, json::SERDE_DEPTH) => {
                    return Err(format!(
                        "approval.when nests more than {} levels deep",
                        json::SERDE_DEPTH
                    ));
                }
                (1, Some(schema @ (JsonValue::Object(_) | JsonValue::Bool(_)))) => {
                    Some(ApprovalRule::When(schema.clone()))
                }
                _ => return Err(APPROVAL_SHAPE.to_owned()),
            },
            Some(_) => return Err(APPROVAL_SHAPE.to_owned()),
        };
        if signature.validate == Some(true) && signature.input.is_none() {
            return Err("validate needs an input schema".to_owned());
        }
        Ok(signature)
    }

    fn apply(self, mut function: BindingFunction) -> BindingFunction {
        if let Some(text) = self.description {
            function = function.description(text);
        }
        if let Some(schema) = self.input {
            function = function.input(schema);
        }
        if let Some(schema) = self.output {
            function = function.output(schema);
        }
        if self.validate == Some(true) {
            function = function.validate_input();
        }
        if let Some(rule) = self.approval {
            function = function.approval(rule);
        }
        function
    }
}

#[derive(Clone, Debug)]
enum Action {
    Echo,
    Reply(JsonValue),
    Reject(String, Option<JsonValue>),
    Command(Vec<String>, Duration),
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
        let action = match (
            object.get("echo"),
            object.get("reply"),
            object.get("reject"),
            object.get("command"),
        ) {
            (Some(JsonValue::Bool(true)), None, None, None) => Action::Echo,
            (None, Some(reply), None, None) => Action::Reply(readable("reply", reply)?.clone()),
            (None, None, Some(JsonValue::String(message)), None) => {
                let data = object.get("data").map(|data| readable("data", data)).transpose()?;
                Action::Reject(message.clone(), data.cloned())
            }
            (None, None, Some(_), None) => return Err("reject must be a string".to_owned()),
            (None, None, None, Some(command)) => {
                let timeout = match object.get("timeoutMs") {
                    None => DEFAULT_COMMAND_TIMEOUT,
                    Some(ms) => Duration::from_millis(
                        ms.as_u64()
                            .filter(|ms| *ms > 0)
                            .ok_or("timeoutMs must be a positive integer")?,
                    ),
                };
                Action::Command(argv(command)?, timeout)
            }
            _ => {
                return Err(
                    "expected exactly one of echo (true), reply, reject, command".to_owned()
                );
            }
        };
        let allowed: &[&str] = match action {
            Action::Reject(..) => &["reject", "data", "delayMs"],
            Action::Echo => &["echo", "delayMs"],
            Action::Reply(_) => &["reply", "delayMs"],
            Action::Command(..) => &["command", "timeoutMs", "delayMs"],
        };
        let described = ["description", "input", "output", "validate", "approval"];
        if let Some(key) = object
            .keys()
            .find(|key| !allowed.contains(&key.as_str()) && !described.contains(&key.as_str()))
        {
            return Err(format!("unknown key {}", json::quote(key)));
        }
        Ok(Self { action, delay })
    }

    async fn call(&self, args: BindingArgs) -> Result<JsonValue, BindingError> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        match &self.action {
            Action::Echo => Ok(args.into_value()),
            Action::Reply(value) => Ok(value.clone()),
            Action::Reject(message, data) => Err(match data {
                Some(data) => BindingError::new(message.clone()).with_data(data.clone()),
                None => BindingError::new(message.clone()),
            }),
            Action::Command(argv, timeout) => run_command(argv, &args, *timeout).await,
        }
    }
}

/// `value`, when a program in either language can read it: the Python child parses a value with
/// the standard library's parser, which stops at its recursion limit, so a value deeper than
/// [`MAX_VALUE_DEPTH`] is a mistake in the file, as it is for `values`.
fn readable<'v>(key: &str, value: &'v JsonValue) -> Result<&'v JsonValue, String> {
    if json::nests_deeper_than(value, MAX_VALUE_DEPTH) {
        return Err(format!("{key} nests more than {MAX_VALUE_DEPTH} levels deep"));
    }
    Ok(value)
}

fn argv(command: &JsonValue) -> Result<Vec<String>, String> {
    let argv: Option<Vec<String>> = command
        .as_array()
        .and_then(|items| items.iter().map(|item| item.as_str().map(str::to_owned)).collect());
    match argv {
        Some(argv) if !argv.is_empty() => Ok(argv),
        _ => Err("command must be a non-empty array of strings".to_owned()),
    }
}
