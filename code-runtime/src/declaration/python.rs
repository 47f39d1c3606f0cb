//! Python stubs of a request's bindings.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::binding::CodeBindingNamespace;
use crate::declaration::schema::{self, Definitions, Object, Property, Type, type_name};
use crate::declaration::{
    CALL_TOOL_DOC, Extras, function_doc, is_dotted, positional_example, value_doc,
};
use crate::json::{self, JsonValue};
use crate::provider::CALL_TOOL;

pub(super) fn render(bindings: &[CodeBindingNamespace], extras: &Extras<'_>) -> String {
    let mut stubs = Stubs::default();
    let mut definitions = Definitions::default();
    let mut body = String::new();
    for namespace in bindings {
        if let Some(class) = &namespace.error_class {
            stubs.taken.insert(class.name.clone());
            stubs.imports.insert("Any");
            let _ = write!(
                body,
                "class {name}(Exception):\n    \"\"\"What a failed call of `{global}` raises: `{property}` names the function, `data` is the host's structured data (or None).\"\"\"\n    {property}: str\n    data: Any\n\n",
                name = class.name,
                global = namespace.global,
                property = class.member_name_property,
            );
        }
    }
    for namespace in bindings {
        stubs.namespace(namespace, &mut definitions, &mut body);
    }
    if extras.call_tool {
        let any = stubs.any();
        let _ = writeln!(body, "async def {CALL_TOOL}(name: str, args: {any} = ..., /) -> {any}:");
        docstring(&[CALL_TOOL_DOC.to_owned()], "    ", &mut body);
        body.push('\n');
    }
    for (name, value) in extras.values {
        let spelled = match value {
            JsonValue::Null => "None".to_owned(),
            JsonValue::Bool(_) => "bool".to_owned(),
            JsonValue::Number(number) if number.is_f64() => "float".to_owned(),
            JsonValue::Number(_) => "int".to_owned(),
            JsonValue::String(_) => "str".to_owned(),
            JsonValue::Array(_) => format!("list[{}]", stubs.any()),
            JsonValue::Object(_) => format!("dict[str, {}]", stubs.any()),
        };
        let _ = writeln!(body, "{name}: {spelled}");
        docstring(&[value_doc(value)], "", &mut body);
        body.push('\n');
    }
    // Named types first (a stub may refer to a class declared later, but readers read down).
    let mut types = String::new();
    for definition in &definitions.list {
        stubs.definition(&definition.name, &definition.ty, &definition.doc, &mut types);
    }
    let mut out = String::new();
    if let Some((function, parameters)) = positional_example(bindings) {
        let keys: Vec<String> =
            parameters.iter().map(|p| format!("{}: {p}", json::quote(p))).collect();
        let _ = writeln!(
            out,
            "# A function whose argument is a dict also takes its keys as positional or keyword arguments, in order: `{function}({list})` is `{function}({{{keys}}})`.\n",
            list = parameters.join(", "),
            keys = keys.join(", "),
        );
    }
    let typing: Vec<&str> =
        stubs.imports.iter().copied().filter(|name| *name != "NotRequired").collect();
    if !typing.is_empty() {
        let _ = writeln!(out, "from typing import {}", typing.join(", "));
    }
    if stubs.imports.contains("NotRequired") {
        out.push_str("from typing_extensions import NotRequired\n");
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&stubs.classes);
    out.push_str(&types);
    out.push_str(&body);
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[derive(Default)]
struct Stubs {
    /// Names from `typing` (and `NotRequired`) the stubs use.
    imports: BTreeSet<&'static str>,
    /// Module-level names given out.
    taken: BTreeSet<String>,
    /// `TypedDict`s made for inline object types, in the order they were made.
    classes: String,
}

impl Stubs {
    fn namespace(
        &mut self,
        namespace: &CodeBindingNamespace,
        definitions: &mut Definitions,
        out: &mut String,
    ) {
        let class = self.fresh(&format!("{}Namespace", type_name(&namespace.global)));
        let mut methods = String::new();
        let mut bare = String::new();
        let mut subscripted = Vec::new();
        for (name, function) in &namespace.functions {
            let stem = type_name(name);
            let input =
                function.input_schema().map_or(Type::Unknown, |s| schema::read(s, definitions));
            let output =
                function.output_schema().map_or(Type::Unknown, |s| schema::read(s, definitions));
            let optional = match &input {
                Type::Object(object) => object.properties.iter().all(|p| !p.required),
                Type::Unknown => true,
                _ => false,
            };
            let input = self.ty(&input, &format!("{stem}Args"));
            let output = self.ty(&output, &format!("{stem}Result"));
            if is_dotted(name) {
                let default = if optional { " = ..." } else { "" };
                let _ = writeln!(
                    methods,
                    "    async def {name}(self, args: {input}{default}, /) -> {output}:"
                );
                docstring(&function_doc(function), "        ", &mut methods);
                if namespace.functions_as_globals {
                    let _ =
                        writeln!(bare, "async def {name}(args: {input}{default}, /) -> {output}:");
                    let doc = function_doc(function);
                    if doc.is_empty() {
                        bare.push_str("    ...\n");
                    }
                    docstring(&doc, "    ", &mut bare);
                    bare.push('\n');
                }
            } else {
                subscripted.push((name.clone(), input, output));
            }
        }
        if subscripted.len() > 1 {
            self.imports.insert("overload");
        }
        for (name, input, output) in &subscripted {
            self.imports.extend(["Awaitable", "Callable", "Literal"]);
            if subscripted.len() > 1 {
                methods.push_str("    @overload\n");
            }
            let _ = writeln!(
                methods,
                "    def __getitem__(self, name: Literal[{}], /) -> Callable[[{input}], Awaitable[{output}]]: ...",
                json::quote(name)
            );
        }
        let _ = writeln!(out, "class {class}:");
        let doc: Vec<String> =
            namespace.description.iter().flat_map(|d| d.lines()).map(str::to_owned).collect();
        let documented = !doc.is_empty();
        docstring(&doc, "    ", out);
        if methods.is_empty() && !documented {
            out.push_str("    ...\n");
        }
        out.push_str(&methods);
        let _ = writeln!(out, "\n{}: {class}\n", namespace.global);
        out.push_str(&bare);
    }

    /// A module-level name not given out yet: `wanted`, else `wanted2`, `wanted3`, …
    fn fresh(&mut self, wanted: &str) -> String {
        let mut candidate = wanted.to_owned();
        let mut counter = 1;
        while self.taken.contains(&candidate) {
            counter += 1;
            candidate = format!("{wanted}{counter}");
        }
        self.taken.insert(candidate.clone());
        candidate
    }

    fn definition(&mut self, name: &str, ty: &Type, doc: &[String], out: &mut String) {
        self.taken.insert(name.to_owned());
        match ty {
            Type::Object(object) if !object.properties.is_empty() => {
                let class = self.typed_dict(name, object, doc);
                out.push_str(&class);
            }
            other => {
                for line in doc {
                    let _ = writeln!(out, "# {line}");
                }
                let spelled = self.ty(other, name);
                let _ = writeln!(out, "{name} = {spelled}\n");
            }
        }
    }

    /// The Python spelling of `ty`; an object type with properties becomes a `TypedDict` named
    /// from `hint`.
    fn ty(&mut self, ty: &Type, hint: &str) -> String {
        match ty {
            Type::Unknown => self.any(),
            Type::Null => "None".to_owned(),
            Type::Boolean => "bool".to_owned(),
            Type::Integer => "int".to_owned(),
            Type::Number => "float".to_owned(),
            Type::String => "str".to_owned(),
            Type::Literal(value) => self.literal(value),
            Type::Array(item) => format!("list[{}]", self.ty(item, &format!("{hint}Item"))),
            Type::Tuple(items, None) if !items.is_empty() => {
                let items: Vec<String> = items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| self.ty(item, &format!("{hint}{index}")))
                    .collect();
                format!("tuple[{}]", items.join(", "))
            }
            Type::Tuple(..) => format!("list[{}]", self.any()),
            Type::Object(object) if object.properties.is_empty() => {
                let value = match &object.additional {
                    Some(value) => self.ty(value, &format!("{hint}Value")),
                    None => self.any(),
                };
                format!("dict[str, {value}]")
            }
            Type::Object(object) => {
                let name = self.fresh(hint);
                let class = self.typed_dict(&name, object, &object.doc);
                self.classes.push_str(&class);
                name
            }
            Type::Union(members) => {
                // Literals together, as one `Literal[...]`, where they stand first.
                let mut literals = Vec::new();
                let mut parts = Vec::new();
                for (index, member) in members.iter().enumerate() {
                    match self.ty(member, &format!("{hint}{}", index + 1)) {
                        text if text.starts_with("Literal[") => {
                            if literals.is_empty() {
                                parts.push(String::new());
                            }
                            literals.push(text["Literal[".len()..text.len() - 1].to_owned());
                        }
                        text => parts.push(text),
                    }
                }
                if let Some(slot) = parts.iter_mut().find(|part| part.is_empty()) {
                    *slot = format!("Literal[{}]", literals.join(", "));
                }
                parts.join(" | ")
            }
            Type::Intersection(members) => match merged(members) {
                Some(object) => self.ty(&Type::Object(object), hint),
                None => self.any(),
            },
            Type::Named(name) => name.clone(),
        }
    }

    fn any(&mut self) -> String {
        self.imports.insert("Any");
        "Any".to_owned()
    }

    fn literal(&mut self, value: &JsonValue) -> String {
        match value {
            JsonValue::Null => "None".to_owned(),
            JsonValue::Bool(true) => self.literal_of("True"),
            JsonValue::Bool(false) => self.literal_of("False"),
            JsonValue::Number(number) if number.is_i64() || number.is_u64() => {
                self.literal_of(&number.to_string())
            }
            JsonValue::Number(_) => "float".to_owned(),
            JsonValue::String(text) => self.literal_of(&json::quote(text)),
            _ => self.any(),
        }
    }

    fn literal_of(&mut self, text: &str) -> String {
        self.imports.insert("Literal");
        format!("Literal[{text}]")
    }

    /// A `TypedDict` declaration: class syntax when every key is an identifier, the functional
    /// syntax otherwise.
    fn typed_dict(&mut self, name: &str, object: &Object, doc: &[String]) -> String {
        self.imports.insert("TypedDict");
        let fields: Vec<(&Property, String)> = object
            .properties
            .iter()
            .map(|property| {
                let spelled =
                    self.ty(&property.ty, &format!("{name}{}", type_name(&property.name)));
                let spelled = if property.required {
                    spelled
                } else {
                    self.imports.insert("NotRequired");
                    format!("NotRequired[{spelled}]")
                };
                (property, spelled)
            })
            .collect();
        let mut out = String::new();
        if fields.iter().all(|(property, _)| is_dotted(&property.name)) {
            let _ = writeln!(out, "class {name}(TypedDict):");
            docstring(doc, "    ", &mut out);
            for (property, spelled) in fields {
                for line in &property.doc {
                    let _ = writeln!(out, "    # {line}");
                }
                let _ = writeln!(out, "    {}: {spelled}", property.name);
            }
        } else {
            for line in doc {
                let _ = writeln!(out, "# {line}");
            }
            let _ = writeln!(out, "{name} = TypedDict({}, {{", json::quote(name));
            for (property, spelled) in fields {
                for line in &property.doc {
                    let _ = writeln!(out, "    # {line}");
                }
                let _ = writeln!(out, "    {}: {spelled},", json::quote(&property.name));
            }
            out.push_str("})\n");
        }
        out.push('\n');
        out
    }
}

/// The objects of an intersection as one object, when every part is an object.
fn merged(members: &[Type]) -> Option<Object> {
    let mut object = Object { properties: Vec::new(), additional: None, doc: Vec::new() };
    for member in members {
        let Type::Object(part) = member else { return None };
        for property in &part.properties {
            match object.properties.iter_mut().find(|p| p.name == property.name) {
                Some(existing) => existing.required |= property.required,
                None => object.properties.push(property.clone()),
            }
        }
    }
    Some(object)
}

/// `lines` as a docstring at `indent`; nothing for no lines.
fn docstring(lines: &[String], indent: &str, out: &mut String) {
    if lines.is_empty() {
        if indent.len() > 4 {
            let _ = writeln!(out, "{indent}...");
        }
        return;
    }
    // Quotes and backslashes in a description must not end or bend the literal.
    let lines: Vec<String> =
        lines.iter().map(|line| line.replace('\\', "\\\\").replace('"', "\\\"")).collect();
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}\"\"\"{}\"\"\"", lines[0]);
        return;
    }
    let _ = writeln!(out, "{indent}\"\"\"{}", lines[0]);
    for line in &lines[1..] {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{indent}{line}");
        }
    }
    let _ = writeln!(out, "{indent}\"\"\"");
}
