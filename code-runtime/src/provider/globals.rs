//! The globals a program sees besides its namespaces and error classes: bare functions, the
//! values of the request, and `call_tool`; planned once here, installed by every substrate.

use std::collections::{HashMap, HashSet};

use crate::binding::CodeBindingNamespace;
use crate::json::{JsonMap, JsonValue, NumberSpelling};
use crate::provider::FunctionId;
use crate::validation::CALL_TOOL;

/// How many bytes of function names the message of an unknown `call_tool` name lists at most.
const LISTING_BYTES: usize = 1000;

/// One global of [`ProgramGlobals`].
#[derive(Debug)]
pub enum ProgramGlobal {
    /// A function of a namespace whose functions are also globals: the same callable as its
    /// namespace member.
    Function(FunctionId),
    /// `call_tool(name, args)`: see [`ToolIndex`].
    CallTool,
    /// A value of the request, installed frozen.
    Value(JsonValue),
}

/// What a substrate installs besides the namespaces and error classes, by name, in this order.
/// Built from a request that [`validate_request`](crate::provider::validate_request) accepted, so
/// every name is a usable identifier taken by nothing else.
#[derive(Debug, Default)]
pub struct ProgramGlobals {
    /// The globals, in installation order: bare functions (namespaces in request order,
    /// functions in declaration order), then `call_tool`, then the values in request order.
    pub installed: Vec<(String, ProgramGlobal)>,
    /// The names `call_tool` takes, when the request asked for it.
    pub tools: Option<ToolIndex>,
}

/// The names `call_tool` resolves: `"global.name"` for every function, and the bare name of a
/// function that no other namespace also has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolIndex {
    /// Each name and its function, qualified names first, in [`FunctionId`] order.
    pub names: Vec<(String, FunctionId)>,
    /// The qualified names joined by `, `, cut at a bound: what the message of an unknown
    /// name lists ([`catalogue::UNKNOWN_TOOL`](crate::provider::catalogue::UNKNOWN_TOOL)).
    pub listing: String,
}

impl ProgramGlobal {
    /// This global as the members of a JSON object, the one spelling every substrate's wire
    /// carries: `"function":N` (its [`FunctionId`]), `"callTool":true`, or `"value":V` (integers
    /// exact). A wire adds what else it needs (a name) around them.
    pub fn write_members(&self, out: &mut String) {
        match self {
            ProgramGlobal::Function(function) => {
                out.push_str("\"function\":");
                out.push_str(&function.index().to_string());
            }
            ProgramGlobal::CallTool => out.push_str("\"callTool\":true"),
            ProgramGlobal::Value(value) => {
                out.push_str("\"value\":");
                crate::json::encode_with(value, NumberSpelling::ExactIntegers, out);
            }
        }
    }

    /// The global an object of [`write_members`](ProgramGlobal::write_members)' members spells,
    /// if it spells one.
    pub fn from_members(object: &JsonMap) -> Option<Self> {
        if let Some(function) = object.get("function") {
            let index = u32::try_from(function.as_u64()?).ok()?;
            return Some(ProgramGlobal::Function(FunctionId::new(index)));
        }
        if object.get("callTool").and_then(JsonValue::as_bool) == Some(true) {
            return Some(ProgramGlobal::CallTool);
        }
        object.get("value").cloned().map(ProgramGlobal::Value)
    }
}

impl ProgramGlobals {
    /// The globals of a request with `namespaces`, `values` and, when `call_tool`, `call_tool`.
    pub fn plan(
        namespaces: &[CodeBindingNamespace],
        values: impl IntoIterator<Item = (String, JsonValue)>,
        call_tool: bool,
    ) -> Self {
        let mut installed: Vec<(String, ProgramGlobal)> = FunctionId::enumerate(namespaces)
            .filter(|(_, namespace, _)| namespace.functions_as_globals)
            .map(|(id, _, name)| (name.to_owned(), ProgramGlobal::Function(id)))
            .collect();
        let tools = call_tool.then(|| {
            installed.push((CALL_TOOL.to_owned(), ProgramGlobal::CallTool));
            ToolIndex::new(namespaces)
        });
        for (name, value) in values {
            installed.push((name, ProgramGlobal::Value(value)));
        }
        Self { installed, tools }
    }
}

impl ToolIndex {
    /// The index of `namespaces`' functions.
    pub fn new(namespaces: &[CodeBindingNamespace]) -> Self {
        let mut names: Vec<(String, FunctionId)> = Vec::new();
        let mut bare: Vec<(&str, FunctionId)> = Vec::new();
        for (id, namespace, name) in FunctionId::enumerate(namespaces) {
            names.push((format!("{}.{name}", namespace.global), id));
            bare.push((name, id));
        }
        let mut listing = String::new();
        for (qualified, _) in &names {
            if listing.len() + qualified.len() + 2 > LISTING_BYTES {
                listing.push_str(", …");
                break;
            }
            if !listing.is_empty() {
                listing.push_str(", ");
            }
            listing.push_str(qualified);
        }
        // A bare name counts once it is unambiguous: one function has it, and it is not already
        // some function's qualified name (a function named "a.b" in another namespace).
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (name, _) in &bare {
            *counts.entry(name).or_default() += 1;
        }
        let qualified: HashSet<&str> = names.iter().map(|(name, _)| name.as_str()).collect();
        let unique: Vec<(String, FunctionId)> = bare
            .iter()
            .filter(|(name, _)| counts[name] == 1 && !qualified.contains(name))
            .map(|(name, id)| ((*name).to_owned(), *id))
            .collect();
        names.extend(unique);
        Self { names, listing }
    }

    /// The function `name` calls, if any.
    pub fn find(&self, name: &str) -> Option<FunctionId> {
        self.names.iter().find(|(key, _)| key == name).map(|(_, id)| *id)
    }
}
