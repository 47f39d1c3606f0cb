//! [`describe`]: what the model reads about a request's bindings, TypeScript declarations or
//! Python stubs, generated from their descriptions and JSON Schemas.

mod python;
mod schema;
mod typescript;

use indexmap::IndexMap;

use crate::approval::ApprovalRule;
use crate::binding::{BindingFunction, CodeBindingNamespace};
use crate::error::ContractError;
use crate::json::{self, JsonValue};
use crate::language::{AsLanguage, Language};
use crate::request::CodeRunRequest;
use crate::validation::{
    is_dunder_member, is_usable_identifier, validate_bindings, validate_request,
};

/// Renders `bindings` as what a model should read before it writes a program against them:
/// TypeScript declarations (`language` `"typescript"`) or Python stubs (`"python"`).
///
/// - TypeScript: a `declare namespace` per binding namespace (a `declare const` object type when
///   a member name is not an identifier, quoted as the program reaches it:
///   `tools["my-tool"](…)`), each function with its JSDoc and `Promise` of its result, `$defs` as
///   named types, and each error class as a declared `Error` subclass with `data` and its
///   member-name property.
/// - Python: `TypedDict`s for object schemas, a class per namespace with an `async def` per
///   function (one positional argument), a `__getitem__` for names that are reached by
///   subscript, and each error class as an `Exception` subclass.
///
/// The schema keywords read are `type` (and type arrays), `properties`, `required`,
/// `additionalProperties`, `items`, `prefixItems`, `enum`, `const`, `anyOf`, `oneOf`, `allOf`,
/// `$ref` into `$defs` or `definitions` (recursive ones included), `nullable`, and `title`,
/// `description`, `format`, `default` and `examples` as doc comments. Anything else reads as
/// `unknown` / `Any`, never as an error. The output is deterministic: the same bindings give the
/// same text.
///
/// ```
/// use code_runtime::{binding, describe, CodeBindingNamespace};
/// use code_runtime::json;
///
/// let tools = CodeBindingNamespace::new("tools").function(
///     "search",
///     binding(|args| async move { Ok(args.into()) })
///         .description("Search the web.")
///         .input(json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}))
///         .output(json!({"type": "array", "items": {"type": "string"}})),
/// );
/// let declarations = describe(&[tools], "typescript")?;
/// assert!(declarations.contains("function search(args: { q: string }): Promise<string[]>;"));
/// # Ok::<(), code_runtime::ContractError>(())
/// ```
///
/// # Errors
///
/// [`ContractError::UnknownLanguage`] for a name no [`Language`] has, and whatever
/// [`CodeRuntime::run`](crate::CodeRuntime::run) would refuse in the bindings.
pub fn describe(
    bindings: &[CodeBindingNamespace],
    language: impl AsLanguage,
) -> Result<String, ContractError> {
    validate_bindings(bindings)?;
    let language = known(language)?;
    Ok(render_checked(bindings, language))
}

/// [`describe`] of namespaces [`validate_bindings`] accepted.
pub(crate) fn render_checked(bindings: &[CodeBindingNamespace], language: Language) -> String {
    let none = IndexMap::new();
    render(bindings, &Extras { values: &none, call_tool: false }, language)
}

/// `language`, or the misuse of naming none.
fn known(language: impl AsLanguage) -> Result<Language, ContractError> {
    language.as_language().map_err(|unknown| ContractError::UnknownLanguage { language: unknown.0 })
}

/// [`describe`] for everything a request's program sees: its namespaces, and also the functions
/// that are bare globals
/// ([`functions_as_globals`](crate::CodeBindingNamespace::functions_as_globals)), `call_tool`
/// ([`CodeRunRequest::call_tool`]) and the names and types of its values
/// ([`CodeRunRequest::values`]; the values themselves are not shown, since they may be large or
/// secret). The program text is ignored.
///
/// # Errors
///
/// As [`describe`], and whatever [`CodeRuntime::run`](crate::CodeRuntime::run) would refuse in
/// the request's bindings and values.
pub fn describe_request(
    request: &CodeRunRequest,
    language: impl AsLanguage,
) -> Result<String, ContractError> {
    validate_request(request)?;
    let language = known(language)?;
    let extras = Extras { values: &request.values, call_tool: request.call_tool };
    Ok(render(&request.bindings, &extras, language))
}

/// What [`describe_request`] adds to the namespaces.
struct Extras<'r> {
    values: &'r IndexMap<String, JsonValue>,
    call_tool: bool,
}

fn render(bindings: &[CodeBindingNamespace], extras: &Extras<'_>, language: Language) -> String {
    match language {
        Language::TypeScript => typescript::render(bindings, extras),
        Language::Python => python::render(bindings, extras),
    }
}

/// Whether a program reaches member `name` as `namespace.name` in both languages (otherwise it
/// writes `namespace["name"]`).
fn is_dotted(name: &str) -> bool {
    is_usable_identifier(name) && !is_dunder_member(name)
}

/// A function's doc lines: its description, then its argument schema's own doc, then whether
/// its calls need approval (so the program is written to expect a denial).
fn function_doc(function: &BindingFunction) -> Vec<String> {
    let mut lines: Vec<String> = function
        .description_text()
        .map(|text| text.lines().map(|line| line.trim_end().to_owned()).collect())
        .unwrap_or_default();
    let paragraph = |own: Vec<String>, lines: &mut Vec<String>| {
        if !own.is_empty() && !lines.is_empty() {
            lines.push(String::new());
        }
        lines.extend(own);
    };
    if let Some(schema) = function.input_schema() {
        paragraph(schema::doc(schema), &mut lines);
    }
    if let Some(rule) = function.approval_rule() {
        let which = match rule {
            ApprovalRule::Always => "Each call",
            ApprovalRule::When(_) => "A call with some arguments",
        };
        paragraph(vec![format!("{which} {APPROVAL_DOC}")], &mut lines);
    }
    lines
}

/// What the doc of a function whose calls need approval says, after "Each call".
const APPROVAL_DOC: &str = "waits for the user's approval; a denied call fails with the \
     namespace's error, message `denied: <reason>`.";

/// An example of positional arguments, from the first function that takes them:
/// `("tools.search", ["q", "limit"])`, as the program reaches it.
fn positional_example(bindings: &[CodeBindingNamespace]) -> Option<(String, Vec<&str>)> {
    bindings.iter().find_map(|namespace| {
        namespace.functions.iter().find_map(|(name, function)| {
            let parameters = function.parameters()?;
            let parameters: Vec<&str> =
                parameters.into_iter().filter(|p| is_usable_identifier(p)).take(3).collect();
            (is_dotted(name) && !parameters.is_empty())
                .then(|| (format!("{}.{name}", namespace.global), parameters))
        })
    })
}

/// What a value's doc says: that the host gives it, and an object's first keys.
fn value_doc(value: &JsonValue) -> String {
    let mut doc = "Given by the host; read-only.".to_owned();
    if let JsonValue::Object(object) = value {
        if !object.is_empty() {
            let keys: Vec<String> = object.keys().take(20).map(|key| json::quote(key)).collect();
            let more = if object.len() > 20 { ", …" } else { "" };
            doc.push_str(&format!(" Keys: {}{more}.", keys.join(", ")));
        }
    }
    doc
}

/// What `call_tool`'s doc says.
const CALL_TOOL_DOC: &str = "Calls a function by its name: \"namespace.function\", or the function's \
     name alone when only one namespace has it; `args` is its argument.";
