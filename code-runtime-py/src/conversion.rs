//! Python objects to and from [`JsonValue`]s: the one place the package crosses between them.
//!
//! Both directions walk the value with a heap stack, never the call stack, so a value nested a
//! million levels deep converts like a flat one (CPython deallocates deep lists and dicts without
//! recursion too). Python to JSON follows the contract's lossless rules
//! ([`code_runtime::json`]): `dict` with `str` keys, `list` and `tuple`, `str` (no lone
//! surrogates), `int` exact as a double, finite `float` (not `-0.0`), `bool`, `None`; a pydantic
//! model converts as its `model_dump(mode="json")` and a dataclass instance as
//! `dataclasses.asdict`; anything else is a [`NotJson`] that names the type and where it was.

use std::collections::HashSet;

use code_runtime::JsonValue;
use code_runtime::json::{self, JsonArray, JsonMap};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// The most values one conversion makes. A Python value can share one list many times over
/// (`a = [b, b]`, `b = [c, c]`, ...), which JSON spells out in full: past this many values the
/// conversion stops instead of spending the host's memory. Far above anything a run's memory
/// budget (512 MiB by default) lets through afterwards.
const MAX_VALUES: usize = 16_000_000;

/// A [`JsonValue`] as a new Python object.
pub(crate) fn to_python<'py>(py: Python<'py>, value: &JsonValue) -> PyResult<Bound<'py, PyAny>> {
    enum Frame<'a, 'py> {
        Array(Bound<'py, PyList>, std::slice::Iter<'a, JsonValue>),
        Object(Bound<'py, PyDict>, indexmap::map::Iter<'a, String, JsonValue>),
    }
    // A container is made empty, placed in its parent at once, and filled as its frame is
    // walked: Python containers are mutable, so no value waits for its children.
    fn open<'a, 'py>(
        py: Python<'py>,
        value: &'a JsonValue,
        stack: &mut Vec<Frame<'a, 'py>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(match value {
            JsonValue::Null => py.None().into_bound(py),
            JsonValue::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
            JsonValue::Number(number) => {
                if let Some(integer) = number.as_i64() {
                    integer.into_pyobject(py)?.into_any()
                } else if let Some(integer) = number.as_u64() {
                    integer.into_pyobject(py)?.into_any()
                } else {
                    PyFloat::new(py, number.as_f64().unwrap_or(f64::NAN)).into_any()
                }
            }
            JsonValue::String(text) => PyString::new(py, text).into_any(),
            JsonValue::Array(items) => {
                let list = PyList::empty(py);
                stack.push(Frame::Array(list.clone(), items.iter()));
                list.into_any()
            }
            JsonValue::Object(members) => {
                let dict = PyDict::new(py);
                stack.push(Frame::Object(dict.clone(), members.iter()));
                dict.into_any()
            }
        })
    }
    let mut stack = Vec::new();
    let root = open(py, value, &mut stack)?;
    while let Some(frame) = stack.last_mut() {
        match frame {
            Frame::Array(list, items) => match items.next() {
                Some(item) => {
                    let list = list.clone();
                    list.append(open(py, item, &mut stack)?)?;
                }
                None => drop(stack.pop()),
            },
            Frame::Object(dict, members) => match members.next() {
                Some((key, item)) => {
                    let dict = dict.clone();
                    dict.set_item(key, open(py, item, &mut stack)?)?;
                }
                None => drop(stack.pop()),
            },
        }
    }
    Ok(root)
}

/// Why a Python value is not JSON: the sentence, naming where (`$.items[2]`).
#[derive(Debug)]
pub(crate) struct NotJson(pub(crate) String);

impl std::fmt::Display for NotJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A step into a container, for the path an error names.
enum Step {
    Index(usize),
    Key(String),
}

/// A container being converted: what it holds so far, the items left (a snapshot, so a value
/// that mutates itself while converting cannot make the walk go on forever), and its identity
/// for the cycle check.
struct Open<'py> {
    built: Built,
    items: std::vec::IntoIter<(Option<String>, Bound<'py, PyAny>)>,
    /// The key (in an object) or index (in an array) of the item being converted.
    step: Step,
    id: usize,
}

enum Built {
    Array(Vec<JsonValue>),
    Object(JsonMap),
}

/// A Python value as lossless JSON.
pub(crate) fn from_python(value: &Bound<'_, PyAny>) -> Result<JsonValue, NotJson> {
    let mut stack: Vec<Open<'_>> = Vec::new();
    let mut open_ids = HashSet::new();
    let mut made = 0usize;
    let mut next = Some(value.clone());
    loop {
        if let Some(item) = next.take() {
            made += 1;
            if made > MAX_VALUES {
                return Err(NotJson(format!(
                    "the value at {} has more than {MAX_VALUES} items in all (a list or dict shared many times over?)",
                    path(&stack)
                )));
            }
            match scalar_or_container(&item, true)
                .map_err(|why| NotJson(format!("{why} at {}", path(&stack))))?
            {
                Converted::Scalar(scalar) => {
                    if let Some(done) = place(&mut stack, scalar) {
                        return Ok(done);
                    }
                }
                Converted::Container(built, items) => {
                    let id = item.as_ptr() as usize;
                    if !open_ids.insert(id) {
                        return Err(NotJson(format!(
                            "the value at {} contains itself (a circular reference)",
                            path(&stack)
                        )));
                    }
                    stack.push(Open { built, items: items.into_iter(), step: Step::Index(0), id });
                }
            }
        }
        let Some(top) = stack.last_mut() else { unreachable_root() };
        match top.items.next() {
            Some((key, item)) => {
                top.step = match (key, &top.built) {
                    (Some(key), _) => Step::Key(key),
                    (None, Built::Array(items)) => Step::Index(items.len()),
                    (None, Built::Object(_)) => Step::Index(0),
                };
                next = Some(item);
            }
            None => {
                let Some(done) = stack.pop() else { unreachable_root() };
                open_ids.remove(&done.id);
                let value = match done.built {
                    Built::Array(items) => JsonValue::Array(JsonArray::from(items)),
                    Built::Object(members) => JsonValue::Object(members),
                };
                if let Some(root) = place(&mut stack, value) {
                    return Ok(root);
                }
            }
        }
    }
}

/// The walk always has an open container when it looks for the next item: a scalar root
/// returns at once and the last container's close returns the root.
fn unreachable_root() -> ! {
    unreachable!("the walk has an open container whenever it looks for an item")
}

/// Puts a finished value into the innermost open container, or returns it when it is the root.
fn place(stack: &mut [Open<'_>], value: JsonValue) -> Option<JsonValue> {
    let Some(top) = stack.last_mut() else { return Some(value) };
    match (&mut top.built, &top.step) {
        (Built::Array(items), _) => items.push(value),
        (Built::Object(members), Step::Key(key)) => {
            members.insert(key.clone(), value);
        }
        (Built::Object(_), Step::Index(_)) => {}
    }
    None
}

enum Converted<'py> {
    Scalar(JsonValue),
    Container(Built, Vec<(Option<String>, Bound<'py, PyAny>)>),
}

fn scalar_or_container<'py>(
    item: &Bound<'py, PyAny>,
    may_dump: bool,
) -> Result<Converted<'py>, String> {
    if item.is_none() {
        return Ok(Converted::Scalar(JsonValue::Null));
    }
    // `bool` before `int`: it is a subclass.
    if let Ok(flag) = item.cast::<PyBool>() {
        return Ok(Converted::Scalar(JsonValue::Bool(flag.is_true())));
    }
    if let Ok(integer) = item.cast::<PyInt>() {
        return integer_value(integer).map(Converted::Scalar);
    }
    if let Ok(float) = item.cast::<PyFloat>() {
        let value = float.value();
        return json::number_from_f64(value)
            .map(|number| Converted::Scalar(JsonValue::Number(number)))
            .map_err(|why| format!("the float {value} is not lossless JSON ({why})"));
    }
    if let Ok(text) = item.cast::<PyString>() {
        // Encoding to UTF-8 fails exactly for a lone surrogate.
        return text
            .to_cow()
            .map(|text| Converted::Scalar(JsonValue::String(text.into_owned())))
            .map_err(|_| "a str with a lone surrogate is not lossless JSON".to_owned());
    }
    if let Ok(list) = item.cast::<PyList>() {
        let items = list.iter().map(|item| (None, item)).collect::<Vec<_>>();
        return Ok(Converted::Container(Built::Array(Vec::with_capacity(items.len())), items));
    }
    if let Ok(tuple) = item.cast::<PyTuple>() {
        let items = tuple.iter().map(|item| (None, item)).collect::<Vec<_>>();
        return Ok(Converted::Container(Built::Array(Vec::with_capacity(items.len())), items));
    }
    if let Ok(dict) = item.cast::<PyDict>() {
        let mut items = Vec::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(format!(
                    "a dict key of type {} is not JSON (keys must be str)",
                    type_name(&key)
                ));
            };
            let key = key
                .to_cow()
                .map_err(|_| "a dict key with a lone surrogate is not lossless JSON".to_owned())?;
            items.push((Some(key.into_owned()), value));
        }
        return Ok(Converted::Container(Built::Object(JsonMap::new()), items));
    }
    // A pydantic model, then a dataclass instance: their JSON form, converted in its turn.
    // Once: a dump is plain data, and a model whose dump is a model again is not JSON.
    if may_dump {
        if let Some(dumped) = dumped(item)? {
            return scalar_or_container(&dumped, false);
        }
    }
    Err(format!(
        "a value of type {} is not JSON (JSON is dict, list, tuple, str, int, float, bool and None)",
        type_name(item)
    ))
}

/// The JSON form a pydantic model or a dataclass instance gives of itself, if it is one.
fn dumped<'py>(item: &Bound<'py, PyAny>) -> Result<Option<Bound<'py, PyAny>>, String> {
    let py = item.py();
    let failed = |error: PyErr| format!("{} could not be converted: {error}", type_name(item));
    if item.is_instance_of::<pyo3::types::PyType>() {
        return Ok(None);
    }
    if item.hasattr("model_dump").unwrap_or(false) && item.hasattr("model_fields").unwrap_or(false)
    {
        let options = PyDict::new(py);
        options.set_item("mode", "json").map_err(failed)?;
        return item.call_method("model_dump", (), Some(&options)).map(Some).map_err(failed);
    }
    if item.hasattr("__dataclass_fields__").unwrap_or(false) {
        let dataclasses = py.import("dataclasses").map_err(failed)?;
        return dataclasses.call_method1("asdict", (item,)).map(Some).map_err(failed);
    }
    Ok(None)
}

fn integer_value(integer: &Bound<'_, PyInt>) -> Result<JsonValue, String> {
    let inexact = || format!("the int {integer} is not exactly representable as a double");
    let number = if let Ok(value) = integer.extract::<i64>() {
        json::Number::from(value)
    } else if let Ok(value) = integer.extract::<u64>() {
        json::Number::from(value)
    } else {
        return Err(inexact());
    };
    let value = JsonValue::Number(number);
    json::validate(&value).map_err(|_| inexact())?;
    Ok(value)
}

fn type_name(item: &Bound<'_, PyAny>) -> String {
    item.get_type().name().map(|name| name.to_string()).unwrap_or_else(|_| "object".to_owned())
}

/// `$`, then `[3]` for each index and `.key` (or `["a key"]`) for each key on the way down.
fn path(stack: &[Open<'_>]) -> String {
    let mut path = String::from("$");
    for open in stack {
        match &open.step {
            Step::Index(index) => path.push_str(&format!("[{index}]")),
            Step::Key(key)
                if !key.is_empty()
                    && key.chars().all(|c| c.is_alphanumeric() || c == '_')
                    && !key.starts_with(|c: char| c.is_ascii_digit()) =>
            {
                path.push('.');
                path.push_str(key);
            }
            Step::Key(key) => path.push_str(&format!("[{}]", json::quote(key))),
        }
    }
    path
}
