//! The tools as the client lists them: each one's name, description and input schema.
//! `run_code`'s description carries the bindings' declarations within a budget, so what a client
//! puts in every prompt stays bounded however large the catalogue.

use code_runtime::json;
use code_runtime::json::JsonValue;
use rmcp::model::{JsonObject, Tool};

use crate::lookup;
use crate::server::Catalogue;

/// How many bytes of declarations `run_code`'s description carries at most (a client puts it
/// in every prompt): the languages' declarations that fit, in the config's order; when none
/// fits, the functions' names, and `describe_tools` for the rest.
const DESCRIPTION_BUDGET: usize = 24 * 1024;

/// A schema this file writes, as rmcp's object (shallow: the copy's recursion is bounded).
fn object(value: JsonValue) -> JsonObject {
    match value.to_serde_json() {
        Ok(serde_json::Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

pub(super) fn run_code_tool(
    catalogue: &Catalogue,
    languages: &[&str],
    declarations: &[(String, String)],
    pausing: bool,
) -> Tool {
    let mut description = format!(
        "Runs one program in a sandbox, in {}. The program is the body of an async function: it \
         calls the functions declared below with `await` (fan out with Promise.all / \
         asyncio.gather), and what it `return`s is the result; what it prints comes back as \
         logs. Nothing else comes back, so filter and summarise in the program. The result is \
         {{\"logs\": [...], \"value\": ...}} or {{\"logs\": [...], \"error\": {{\"kind\", \"message\"}}}}.",
        languages.join(" or ")
    );
    description.push_str(
        " To keep state between calls, give the same \"session\": \"NAME\": the top-level          variables, functions, classes and imports a run leaves carry over to the next run in          that session (each run still starts fresh, with them restored); the result's          \"session\" says what was kept and what was dropped and why (open files, say).",
    );
    if let Some(bytes) = catalogue.result_bytes {
        description.push_str(&format!(
            " A result over about {} tokens comes back shrunk: its largest strings and arrays \
             cut, marked \"…[truncated N chars]\" and \"… N more items\", with \
             \"truncated\": {{\"fromBytes\", \"toBytes\"}}; return only what you need.",
            bytes / 4
        ));
    }
    if pausing {
        description.push_str(
            " A call that needs the user's approval may pause the run: the result is then \
             {\"logs\": [...], \"paused\": {\"pending\": [{\"id\", \"namespace\", \"function\", \"args\"}], \
             \"checkpoint\": {...}}}; ask the user, then call resume_run with the checkpoint and \
             the ids to allow or deny.",
        );
    }
    if languages.contains(&"python") && !catalogue.python_packages.is_empty() {
        description.push_str(&crate::packages_line(&catalogue.python_packages));
    }
    // Each language's declarations while they fit, in the config's order; the rest are a
    // describe_tools call away.
    let mut room = DESCRIPTION_BUDGET;
    let mut left_out = Vec::new();
    for (language, text) in declarations {
        if text.len() > room {
            left_out.push(language.as_str());
            continue;
        }
        room -= text.len();
        let fence = if language == "python" { "python" } else { "ts" };
        description.push_str(&format!("\n\n{language}:\n```{fence}\n{text}\n```"));
    }
    if left_out.len() == declarations.len() {
        let names: Vec<String> = catalogue
            .namespaces
            .iter()
            .flat_map(|ns| ns.functions.keys().map(move |name| format!("{}.{name}", ns.global)))
            .collect();
        description.push_str(&format!(
            "\n\nThe functions (describe_tools gives their declarations, search_tools finds them by keyword): {}",
            names.join(", ")
        ));
    } else if !left_out.is_empty() {
        description.push_str(&format!(
            "\n\nFor {}, describe_tools with that language gives the same functions' declarations.",
            left_out.join(" and ")
        ));
    }
    let schema = json!({
        "type": "object",
        "properties": {
            "code": { "type": "string", "description": "The program." },
            "language": { "type": "string", "enum": languages, "description": format!("Default: {}.", languages[0]) },
            "session": { "type": "string", "maxLength": 128, "description": "Variables and definitions carry over between runs in the same session: a name of your choosing." },
        },
        "required": ["code"],
    });
    Tool::new("run_code", description, object(schema))
}

pub(super) fn resume_run_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "checkpoint": { "type": "object", "description": "The paused result's checkpoint, as it came: the checkpoint, or the {\"kept\": ...} handle of one the server keeps (taken by the first resume_run that names it)." },
            "allow": { "type": "array", "items": { "type": "integer" }, "description": "Ids of pending calls the user allows." },
            "deny": {
                "type": "array",
                "items": { "type": "object", "properties": { "id": { "type": "integer" }, "reason": { "type": "string" } }, "required": ["id"] },
                "description": "Pending calls the user denies, each with an optional reason the program sees.",
            },
        },
        "required": ["checkpoint"],
    });
    Tool::new(
        "resume_run",
        "Continues a run that paused for the user's approval: the program runs again from its \
         start, the calls it made before are answered as they were, the decisions apply to its \
         pending calls, and it goes on. The result is as run_code's.",
        object(schema),
    )
}

pub(super) fn search_tools_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "query": { "type": "string", "maxLength": lookup::MAX_QUERY_BYTES, "description": "A few keywords." },
        },
        "required": ["query"],
    });
    Tool::new(
        "search_tools",
        "Finds the functions run_code's programs can call whose name or description matches the \
         keywords: [{name: \"namespace.function\", description}], best first.",
        object(schema),
    )
}

pub(super) fn describe_tools_tool(languages: &[&str]) -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "names": { "type": "array", "items": { "type": "string" }, "maxItems": lookup::MAX_DESCRIBE_NAMES, "description": "\"namespace.function\" or a namespace." },
            "language": { "type": "string", "enum": languages },
        },
        "required": ["names"],
    });
    Tool::new(
        "describe_tools",
        "The declarations (TypeScript) or stubs (Python) of the named functions or namespaces, \
         as run_code's programs call them.",
        object(schema),
    )
}
