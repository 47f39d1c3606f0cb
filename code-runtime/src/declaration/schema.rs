//! JSON Schema, read as the type a program works with ([`Type`]): the subset tool catalogues use,
//! everything else as [`Type::Unknown`], never an error.

use crate::json::{self, JsonMap, JsonValue};

/// A schema nested deeper than this reads as [`Type::Unknown`]: schemas are the host's, but a
/// generated one can nest without bound, and reading recurses.
const MAX_DEPTH: usize = 48;

/// What a value of a schema is, as declarations spell it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Type {
    Unknown,
    Null,
    Boolean,
    Integer,
    Number,
    String,
    /// A `const`, or one member of an `enum`.
    Literal(JsonValue),
    Array(Box<Type>),
    /// `prefixItems` (or draft-07 `items: [...]`), then what may follow.
    Tuple(Vec<Type>, Option<Box<Type>>),
    Object(Object),
    /// `anyOf`, `oneOf`, a type array, an `enum`.
    Union(Vec<Type>),
    /// `allOf`.
    Intersection(Vec<Type>),
    /// A `$defs` (or `definitions`) entry, by the name [`Definitions`] gave it.
    Named(String),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Object {
    pub(crate) properties: Vec<Property>,
    /// `additionalProperties` as a type: `None` when the object admits no others or says nothing
    /// (and has properties).
    pub(crate) additional: Option<Box<Type>>,
    pub(crate) doc: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Property {
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) required: bool,
    pub(crate) doc: Vec<String>,
}

/// A named type to declare: a `$defs` entry.
#[derive(Clone, Debug)]
pub(crate) struct Definition {
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) doc: Vec<String>,
}

/// The named types of one rendering, shared by every schema in it: a definition met again (the
/// same name and text, as catalogues repeat them) keeps its name; a different one under a taken
/// name gets a numbered one.
#[derive(Debug, Default)]
pub(crate) struct Definitions {
    /// In the order they were first met; a definition is listed before it is read, so a
    /// recursive one refers to itself by name.
    pub(crate) list: Vec<Definition>,
    /// Per definition: its source text, so a repeat is recognised.
    texts: Vec<String>,
}

impl Definitions {
    fn name_for(&self, wanted: &str, text: &str) -> Result<String, String> {
        let mut candidate = wanted.to_owned();
        let mut counter = 1;
        loop {
            match self.list.iter().position(|definition| definition.name == candidate) {
                Some(index) if self.texts[index] == text => return Ok(candidate),
                Some(_) => {
                    counter += 1;
                    candidate = format!("{wanted}{counter}");
                }
                None => return Err(candidate),
            }
        }
    }
}

/// Reads `schema`, whose `$defs` are reached from `root`.
pub(crate) fn read(schema: &JsonValue, definitions: &mut Definitions) -> Type {
    Reader { root: schema, definitions }.read(schema, 0)
}

/// The doc lines of a schema: `title`, `description`, then `format`, `default` and `examples`.
pub(crate) fn doc(schema: &JsonValue) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(object) = schema.as_object() else { return lines };
    for key in ["title", "description"] {
        if let Some(text) = object.get(key).and_then(JsonValue::as_str) {
            lines.extend(text.lines().map(str::trim_end).map(str::to_owned));
        }
    }
    if let Some(format) = object.get("format").and_then(JsonValue::as_str) {
        lines.push(format!("Format: {format}"));
    }
    if let Some(default) = object.get("default") {
        lines.push(format!("Default: {}", json::encode(default)));
    }
    if let Some(examples) = object.get("examples").and_then(JsonValue::as_array) {
        let examples: Vec<String> = examples.iter().map(json::encode).collect();
        if !examples.is_empty() {
            lines.push(format!("Examples: {}", examples.join(", ")));
        }
    }
    lines
}

struct Reader<'a> {
    root: &'a JsonValue,
    definitions: &'a mut Definitions,
}

impl Reader<'_> {
    fn read(&mut self, schema: &JsonValue, depth: usize) -> Type {
        if depth > MAX_DEPTH {
            return Type::Unknown;
        }
        let Some(object) = schema.as_object() else {
            // `true` (anything) and `false` (nothing) both read as unknown.
            return Type::Unknown;
        };
        if let Some(reference) = object.get("$ref").and_then(JsonValue::as_str) {
            return self.reference(reference, depth);
        }
        if let Some(constant) = object.get("const") {
            return Type::Literal(constant.clone());
        }
        if let Some(members) = object.get("enum").and_then(JsonValue::as_array) {
            return union(members.iter().map(|member| Type::Literal(member.clone())).collect());
        }
        let mut parts = Vec::new();
        let own = self.own_type(object, depth);
        if own != Type::Unknown {
            parts.push(own);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(choices) = object.get(key).and_then(JsonValue::as_array) {
                parts.push(union(choices.iter().map(|s| self.read(s, depth + 1)).collect()));
            }
        }
        if let Some(all) = object.get("allOf").and_then(JsonValue::as_array) {
            parts.extend(all.iter().map(|s| self.read(s, depth + 1)));
        }
        let ty = match parts.len() {
            0 => Type::Unknown,
            1 => parts.pop().unwrap_or(Type::Unknown),
            _ => Type::Intersection(parts),
        };
        if object.get("nullable").and_then(JsonValue::as_bool) == Some(true) {
            return union(vec![ty, Type::Null]);
        }
        ty
    }

    /// The type `type` (one or an array) and the keywords beside it say, before any combinator.
    fn own_type(&mut self, object: &JsonMap, depth: usize) -> Type {
        match object.get("type") {
            Some(JsonValue::String(name)) => self.named_type(name, object, depth),
            Some(JsonValue::Array(names)) => union(
                names
                    .iter()
                    .filter_map(JsonValue::as_str)
                    .map(|name| self.named_type(name, object, depth))
                    .collect(),
            ),
            _ if object.contains_key("properties")
                || object.contains_key("additionalProperties") =>
            {
                self.object(object, depth)
            }
            _ if object.contains_key("items") || object.contains_key("prefixItems") => {
                self.array(object, depth)
            }
            _ => Type::Unknown,
        }
    }

    fn named_type(&mut self, name: &str, object: &JsonMap, depth: usize) -> Type {
        match name {
            "null" => Type::Null,
            "boolean" => Type::Boolean,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "string" => Type::String,
            "array" => self.array(object, depth),
            "object" => self.object(object, depth),
            _ => Type::Unknown,
        }
    }

    fn array(&mut self, object: &JsonMap, depth: usize) -> Type {
        let prefix = object
            .get("prefixItems")
            .or_else(|| object.get("items").filter(|items| items.is_array()))
            .and_then(JsonValue::as_array);
        let rest_schema = match prefix {
            Some(_) if object.contains_key("prefixItems") => object.get("items"),
            Some(_) => object.get("additionalItems"),
            None => object.get("items"),
        };
        let rest = match rest_schema {
            Some(JsonValue::Bool(false)) => None,
            Some(schema) => Some(self.read(schema, depth + 1)),
            None if prefix.is_some() => None,
            None => Some(Type::Unknown),
        };
        match prefix {
            Some(items) => Type::Tuple(
                items.iter().map(|item| self.read(item, depth + 1)).collect(),
                rest.map(Box::new),
            ),
            None => Type::Array(Box::new(rest.unwrap_or(Type::Unknown))),
        }
    }

    fn object(&mut self, object: &JsonMap, depth: usize) -> Type {
        let required: Vec<&str> = object
            .get("required")
            .and_then(JsonValue::as_array)
            .map(|names| names.iter().filter_map(JsonValue::as_str).collect())
            .unwrap_or_default();
        let mut properties = Vec::new();
        if let Some(declared) = object.get("properties").and_then(JsonValue::as_object) {
            for (name, schema) in declared {
                properties.push(Property {
                    name: name.clone(),
                    ty: self.read(schema, depth + 1),
                    required: required.contains(&name.as_str()),
                    doc: doc(schema),
                });
            }
        }
        let additional = match object.get("additionalProperties") {
            Some(JsonValue::Bool(false)) => None,
            Some(JsonValue::Bool(true)) => Some(Type::Unknown),
            Some(schema) => Some(self.read(schema, depth + 1)),
            None if properties.is_empty() => Some(Type::Unknown),
            None => None,
        };
        Type::Object(Object { properties, additional: additional.map(Box::new), doc: Vec::new() })
    }

    /// A local reference, `#/$defs/Name` or `#/definitions/Name`; anything else is unknown.
    fn reference(&mut self, reference: &str, depth: usize) -> Type {
        let Some((section, name)) = ["#/$defs/", "#/definitions/"].iter().find_map(|prefix| {
            reference.strip_prefix(prefix).map(|name| (&prefix[2..prefix.len() - 1], name))
        }) else {
            return Type::Unknown;
        };
        let name = name.replace("~1", "/").replace("~0", "~");
        let Some(schema) = self.root.get(section).and_then(|defs| defs.get(&name)) else {
            return Type::Unknown;
        };
        let text = json::encode(schema);
        let wanted = type_name(&name);
        match self.definitions.name_for(&wanted, &text) {
            Ok(known) => Type::Named(known),
            Err(fresh) => {
                let index = self.definitions.list.len();
                self.definitions.list.push(Definition {
                    name: fresh.clone(),
                    ty: Type::Unknown,
                    doc: doc(schema),
                });
                self.definitions.texts.push(text);
                let ty = self.read(schema, depth + 1);
                self.definitions.list[index].ty = ty;
                Type::Named(fresh)
            }
        }
    }
}

/// A union of `members`, flattened, without repeats; one member is itself.
fn union(members: Vec<Type>) -> Type {
    let mut flat: Vec<Type> = Vec::new();
    for member in members {
        let parts = match member {
            Type::Union(parts) => parts,
            other => vec![other],
        };
        for part in parts {
            if !flat.contains(&part) {
                flat.push(part);
            }
        }
    }
    if flat.contains(&Type::Unknown) {
        return Type::Unknown;
    }
    match flat.len() {
        0 => Type::Unknown,
        1 => flat.pop().unwrap_or(Type::Unknown),
        _ => Type::Union(flat),
    }
}

/// `name` as a type name: letters, digits and `_` kept, the first letter of each word upper
/// case, never starting with a digit; `Type` when nothing is left.
pub(crate) fn type_name(name: &str) -> String {
    let mut out = String::new();
    let mut upper = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if upper {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
            upper = false;
        } else {
            upper = true;
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "Type");
    }
    out
}
