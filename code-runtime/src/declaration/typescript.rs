//! TypeScript declarations of a request's bindings.

use std::fmt::Write;

use crate::binding::{BindingFunction, CodeBindingNamespace};
use crate::declaration::schema::{self, Definitions, Object, Type};
use crate::declaration::{
    CALL_TOOL_DOC, Extras, function_doc, is_dotted, positional_example, value_doc,
};
use crate::json::{self, JsonValue};
use crate::provider::CALL_TOOL;

pub(super) fn render(bindings: &[CodeBindingNamespace], extras: &Extras<'_>) -> String {
    let mut out = String::new();
    if let Some((function, parameters)) = positional_example(bindings) {
        let _ = writeln!(
            out,
            "/** A function whose argument is an object also takes its properties as positional arguments, in order: `{function}({list})` is `{function}({{ {list} }})`. */\n",
            list = parameters.join(", "),
        );
    }
    for namespace in bindings {
        if let Some(class) = &namespace.error_class {
            let _ = write!(
                out,
                "/** What a failed call of `{global}` rejects with: `{property}` names the function, `data` is the host's structured data (or null). */\n\
                 declare class {name} extends Error {{\n  readonly {property}: string;\n  readonly data: unknown;\n}}\n\n",
                global = namespace.global,
                name = class.name,
                property = class.member_name_property,
            );
        }
    }
    for namespace in bindings {
        let members = render_namespace(namespace, &mut out);
        if namespace.functions_as_globals {
            // Named types live in the namespace's declaration.
            let prefix = format!("{}.", namespace.global);
            for member in &members {
                doc_comment(member.doc.clone(), "", &mut out);
                let _ = writeln!(
                    out,
                    "declare function {}({}): Promise<{}>;",
                    member.name,
                    parameter(member, "", &prefix),
                    ty(&member.output, "", &prefix)
                );
            }
            out.push('\n');
        }
    }
    if extras.call_tool {
        doc_comment(vec![CALL_TOOL_DOC.to_owned()], "", &mut out);
        let _ = writeln!(
            out,
            "declare function {CALL_TOOL}(name: string, args?: unknown): Promise<unknown>;\n"
        );
    }
    for (name, value) in extras.values {
        doc_comment(vec![value_doc(value)], "", &mut out);
        let _ = writeln!(out, "declare const {name}: {};\n", value_type(value));
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// One function's declaration parts: doc, argument type and whether it may be left out, result.
struct Member {
    name: String,
    doc: Vec<String>,
    input: Type,
    optional: bool,
    output: Type,
}

/// A namespace's declaration; returns its members, for the bare globals.
fn render_namespace(namespace: &CodeBindingNamespace, out: &mut String) -> Vec<Member> {
    let mut definitions = Definitions::default();
    let members: Vec<Member> = namespace
        .functions
        .iter()
        .map(|(name, function)| member(name, function, &mut definitions))
        .collect();
    let global = &namespace.global;
    let dotted = namespace.functions.keys().all(|name| is_dotted(name));
    doc_comment(
        namespace.description.iter().flat_map(|d| d.lines()).map(str::to_owned).collect(),
        "",
        out,
    );
    if dotted || !definitions.list.is_empty() {
        let _ = writeln!(out, "declare namespace {global} {{");
        for definition in &definitions.list {
            doc_comment(definition.doc.clone(), "  ", out);
            let _ = writeln!(out, "  type {} = {};", definition.name, ty(&definition.ty, "  ", ""));
        }
        if dotted {
            for member in &members {
                doc_comment(member.doc.clone(), "  ", out);
                let _ = writeln!(
                    out,
                    "  function {}({}): Promise<{}>;",
                    member.name,
                    parameter(member, "  ", ""),
                    ty(&member.output, "  ", "")
                );
            }
        }
        out.push_str("}\n");
    }
    if !dotted {
        // Types declared above are reached through the namespace's name.
        let prefix = format!("{global}.");
        let _ = writeln!(out, "declare const {global}: {{");
        for member in &members {
            doc_comment(member.doc.clone(), "  ", out);
            let _ = writeln!(
                out,
                "  {}({}): Promise<{}>;",
                key(&member.name),
                parameter(member, "  ", &prefix),
                ty(&member.output, "  ", &prefix)
            );
        }
        out.push_str("};\n");
    }
    out.push('\n');
    members
}

/// A value's type, from its shape at the top: a scalar's type, or a read-only array or record.
fn value_type(value: &JsonValue) -> &'static str {
    match value {
        JsonValue::Null => "null",
        JsonValue::Bool(_) => "boolean",
        JsonValue::Number(_) => "number",
        JsonValue::String(_) => "string",
        JsonValue::Array(_) => "readonly unknown[]",
        JsonValue::Object(_) => "Readonly<Record<string, unknown>>",
    }
}

fn member(name: &str, function: &BindingFunction, definitions: &mut Definitions) -> Member {
    let (input, optional) = match function.input_schema() {
        Some(schema) => {
            let input = schema::read(schema, definitions);
            let optional = match &input {
                Type::Object(object) => object.properties.iter().all(|p| !p.required),
                Type::Unknown => true,
                _ => false,
            };
            (input, optional)
        }
        None => (Type::Unknown, true),
    };
    let output = function.output_schema().map_or(Type::Unknown, |s| schema::read(s, definitions));
    Member { name: name.to_owned(), doc: function_doc(function), input, optional, output }
}

fn parameter(member: &Member, indent: &str, prefix: &str) -> String {
    let mark = if member.optional { "?" } else { "" };
    format!("args{mark}: {}", ty(&member.input, indent, prefix))
}

/// `lines` as a JSDoc comment at `indent`: one line when it fits, else one per line.
fn doc_comment(lines: Vec<String>, indent: &str, out: &mut String) {
    if lines.is_empty() {
        return;
    }
    // A `*/` in a description would end the comment early.
    let lines: Vec<String> = lines.into_iter().map(|line| line.replace("*/", "*\\/")).collect();
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}/** {} */", lines[0]);
        return;
    }
    let _ = writeln!(out, "{indent}/**");
    for line in lines {
        if line.is_empty() {
            let _ = writeln!(out, "{indent} *");
        } else {
            let _ = writeln!(out, "{indent} * {line}");
        }
    }
    let _ = writeln!(out, "{indent} */");
}

/// A property or member name as TypeScript accepts it: bare when it is an identifier, else a
/// string literal.
fn key(name: &str) -> String {
    if is_dotted(name) { name.to_owned() } else { json::quote(name) }
}

/// The TypeScript spelling of `ty`; multi-line object types are indented from `indent`, and
/// named types are reached through `prefix`.
fn ty(spelled: &Type, indent: &str, prefix: &str) -> String {
    match spelled {
        Type::Unknown => "unknown".to_owned(),
        Type::Null => "null".to_owned(),
        Type::Boolean => "boolean".to_owned(),
        Type::Integer | Type::Number => "number".to_owned(),
        Type::String => "string".to_owned(),
        Type::Literal(value) => literal(value),
        Type::Array(item) => format!("{}[]", grouped(item, indent, prefix)),
        Type::Tuple(items, rest) => {
            let mut parts: Vec<String> =
                items.iter().map(|item| ty(item, indent, prefix)).collect();
            if let Some(rest) = rest {
                parts.push(format!("...{}[]", grouped(rest, indent, prefix)));
            }
            format!("[{}]", parts.join(", "))
        }
        Type::Object(object) => object_type(object, indent, prefix),
        Type::Union(members) => {
            members.iter().map(|m| grouped(m, indent, prefix)).collect::<Vec<_>>().join(" | ")
        }
        Type::Intersection(members) => {
            members.iter().map(|m| grouped(m, indent, prefix)).collect::<Vec<_>>().join(" & ")
        }
        Type::Named(name) => format!("{prefix}{name}"),
    }
}

/// `ty`, parenthesised when it is a union or intersection (inside `[]`, `|` or `&`).
fn grouped(member: &Type, indent: &str, prefix: &str) -> String {
    let text = ty(member, indent, prefix);
    match member {
        Type::Union(_) | Type::Intersection(_) => format!("({text})"),
        _ => text,
    }
}

fn literal(value: &JsonValue) -> String {
    match value {
        JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) | JsonValue::String(_) => {
            json::encode(value)
        }
        // An object or array constant: its shape is what a program can rely on.
        _ => "unknown".to_owned(),
    }
}

fn object_type(object: &Object, indent: &str, prefix: &str) -> String {
    let documented = object.properties.iter().any(|p| !p.doc.is_empty());
    let inner = format!("{indent}  ");
    let mut fields: Vec<(Vec<String>, String)> = object
        .properties
        .iter()
        .map(|property| {
            let mark = if property.required { "" } else { "?" };
            let field =
                format!("{}{mark}: {}", key(&property.name), ty(&property.ty, &inner, prefix));
            (property.doc.clone(), field)
        })
        .collect();
    if let Some(additional) = &object.additional {
        // Declared properties must fit the index signature's type.
        let value = if object.properties.is_empty() {
            ty(additional, &inner, prefix)
        } else {
            "unknown".to_owned()
        };
        fields.push((Vec::new(), format!("[key: string]: {value}")));
    }
    if fields.is_empty() {
        return "{}".to_owned();
    }
    if !documented {
        let fields: Vec<String> = fields.into_iter().map(|(_, field)| field).collect();
        return format!("{{ {} }}", fields.join("; "));
    }
    let mut out = String::from("{\n");
    for (doc, field) in fields {
        doc_comment(doc, &inner, &mut out);
        let _ = writeln!(out, "{inner}{field};");
    }
    out.push_str(indent);
    out.push('}');
    out
}
