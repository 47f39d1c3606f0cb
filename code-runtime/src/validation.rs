//! The portable-identifier contract: which binding declarations every provider accepts.
//!
//! The sets live here once and every provider imports them, so a namespace list valid in one
//! language is valid in the other (a per-language check would let `lambda` pass TypeScript and fail
//! Python, or `$tools` pass TypeScript and fail Python).

use std::collections::HashSet;

use crate::binding::CodeBindingNamespace;
use crate::error::ContractError;
use crate::json;
use crate::request::CodeRunRequest;

/// The name of the global that calls a function by its name
/// ([`CodeRunRequest::call_tool`](crate::CodeRunRequest::call_tool)).
pub const CALL_TOOL: &str = "call_tool";

/// How deeply a value of the request may nest: every substrate builds it before the program
/// runs, and the Python child parses it with the interpreter's recursive JSON reader.
pub const MAX_VALUE_DEPTH: usize = 256;

/// Reserved words of ECMAScript (reserved and strict-mode reserved, 48) and Python keywords and soft
/// keywords not already listed (23). Case-sensitive. `type` and `_` are Python soft keywords,
/// reserved for safety.
#[rustfmt::skip]
pub const PORTABLE_RESERVED_WORDS: [&str; 71] = [
    // ECMAScript.
    "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
    "do", "else", "enum", "export", "extends", "false", "finally", "for", "function", "if", "import",
    "in", "instanceof", "new", "null", "return", "super", "switch", "this", "throw", "true", "try",
    "typeof", "var", "void", "while", "with", "yield", "let", "static", "implements", "interface",
    "package", "private", "protected", "public", "arguments", "eval",
    // Python.
    "False", "None", "True", "and", "as", "assert", "async", "def", "del", "elif", "except", "from",
    "global", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "match", "type", "_",
];

/// The name of the function that wraps a program in every provider. Reserved as a binding global.
pub const PROGRAM_WRAPPER_NAME: &str = "__code_runtime_main__";

/// Globals a namespace or error class may not take: `console` (the TypeScript log slot), the
/// program wrapper, the only module globals the Python bootstrap seeds (`__builtins__`,
/// `__name__`), and `__debug__` (a CPython compile-time constant, so a binding under that name would
/// be unreachable). A provider that seeds any other global must add it here.
pub const RESERVED_BINDING_GLOBALS: [&str; 5] =
    ["console", PROGRAM_WRAPPER_NAME, "__builtins__", "__name__", "__debug__"];

/// Names an error class's `member_name_property` may not take: they collide with standard members
/// of a JavaScript `Error` or a Python `Exception`, or with `data`, the member every rejection
/// carries its structured data in.
pub const RESERVED_ERROR_MEMBERS: [&str; 7] =
    ["name", "message", "stack", "args", "with_traceback", "add_note", "data"];

/// Globals a program needs, which a namespace or an error class would hide (docs/design.md §9 item 9):
/// the global object's own properties in a fresh V8 context (ECMAScript and the runtime's
/// `setTimeout` / `clearTimeout`), and Python's public builtins (3.9 to 3.13). Tests in each
/// provider check that every global its programs start with is listed here.
#[rustfmt::skip]
pub const SHADOWED_GLOBALS: [&str; 232] = [
    // ECMAScript globals of a fresh V8 context, and the runtime's timers.
    "AggregateError", "Array", "ArrayBuffer", "AsyncDisposableStack", "Atomics", "BigInt",
    "BigInt64Array", "BigUint64Array", "Boolean", "DataView", "Date", "DisposableStack", "Error",
    "EvalError", "FinalizationRegistry", "Float16Array", "Float32Array", "Float64Array", "Function",
    "Infinity", "Int16Array", "Int32Array", "Int8Array", "Intl", "Iterator", "JSON", "Map", "Math",
    "NaN", "Number", "Object", "Promise", "Proxy", "RangeError", "ReferenceError", "Reflect",
    "RegExp", "Set", "SharedArrayBuffer", "String", "SuppressedError", "Symbol", "SyntaxError",
    "Temporal", "TypeError", "URIError", "Uint16Array", "Uint32Array", "Uint8Array",
    "Uint8ClampedArray", "WeakMap", "WeakRef", "WeakSet", "WebAssembly", "decodeURI",
    "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape", "globalThis", "isFinite",
    "isNaN", "parseFloat", "parseInt", "undefined", "unescape", "setTimeout", "clearTimeout",
    // The runtime's own (`performance.now`, `crypto.getRandomValues` / `randomUUID`), and the
    // web platform's (`code-runtime-worker-thread/src/web.rs`).
    "performance", "crypto", "URL", "URLSearchParams", "DOMException", "Event", "CustomEvent",
    "EventTarget", "AbortController", "AbortSignal", "atob", "btoa", "TextEncoder", "TextDecoder",
    "setInterval", "clearInterval", "queueMicrotask", "structuredClone", "navigator", "CryptoKey",
    "SubtleCrypto",
    // Python builtins (3.9 to 3.13); keywords and `eval`/`type` are reserved words already.
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
    "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
    "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
    "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError",
    "Exception", "ExceptionGroup", "FileExistsError", "FileNotFoundError", "FloatingPointError",
    "FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError",
    "IndexError", "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt",
    "LookupError", "MemoryError", "ModuleNotFoundError", "NameError", "NotADirectoryError",
    "NotImplemented", "NotImplementedError", "OSError", "OverflowError",
    "PendingDeprecationWarning", "PermissionError", "ProcessLookupError", "PythonFinalizationError",
    "RecursionError", "ResourceWarning", "RuntimeError", "RuntimeWarning", "StopAsyncIteration",
    "StopIteration", "SyntaxWarning", "SystemError", "SystemExit", "TabError", "TimeoutError",
    "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError",
    "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError", "Warning",
    "ZeroDivisionError", "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool",
    "breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod", "compile", "complex",
    "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate", "exec", "exit",
    "filter", "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash", "help",
    "hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "license", "list",
    "locals", "map", "max", "memoryview", "min", "next", "object", "oct", "open", "ord", "pow",
    "print", "property", "quit", "range", "repr", "reversed", "round", "set", "setattr", "slice",
    "sorted", "staticmethod", "str", "sum", "tuple", "vars", "zip", "__import__",
    "__build_class__",
];

/// Whether `name` is a portable identifier: `[A-Za-z_][A-Za-z0-9_]*`, ASCII only, no `$`.
///
/// Reserved words pass this check; see [`is_usable_identifier`].
pub fn is_portable_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// Whether `name` is a portable identifier and not in [`PORTABLE_RESERVED_WORDS`].
pub fn is_usable_identifier(name: &str) -> bool {
    is_portable_identifier(name) && !PORTABLE_RESERVED_WORDS.contains(&name)
}

/// Whether `name` is a dunder name, `^__.+__$` as a JavaScript regular expression reads it: two
/// underscores, at least one character that is not a line terminator, two underscores. Matches
/// `__dict__`, `__x__`, `_____` and `__proto__`; not `__`, `____`, `__mid` or `_private`.
pub fn is_dunder_member(name: &str) -> bool {
    let Some(middle) = name.strip_prefix("__").and_then(|rest| rest.strip_suffix("__")) else {
        return false;
    };
    // `.` in a JavaScript regular expression matches anything but a line terminator.
    !middle.is_empty() && !middle.contains(['\n', '\r', '\u{2028}', '\u{2029}'])
}

/// Checks binding declarations, in the order of docs/reference.md §2.2 (it decides which message a
/// request with several problems gets).
///
/// Pass 1 checks every namespace `global` in request order: usable identifier, not reserved, not a
/// global the program needs ([`SHADOWED_GLOBALS`]), not a duplicate. Pass 2 then checks every error
/// class in request order: usable identifier, not reserved, not shadowing, not equal to any
/// namespace global or earlier class name, and a usable `member_name_property`. Pass 3 compiles
/// the input schema of every function that validates its input (once per function: the result is
/// kept). Function names are deliberately not checked: any string (`""`, `"my-tool"`,
/// `"__proto__"`) is an ordinary member name.
///
/// # Errors
///
/// The first problem found, as a [`ContractError`].
pub fn validate_bindings(namespaces: &[CodeBindingNamespace]) -> Result<(), ContractError> {
    let mut globals = HashSet::with_capacity(namespaces.len());
    for namespace in namespaces {
        let global = namespace.global.as_str();
        if !is_usable_identifier(global) {
            return Err(ContractError::UnusableGlobal { global: global.to_owned() });
        }
        if RESERVED_BINDING_GLOBALS.contains(&global) {
            return Err(ContractError::ReservedGlobal { name: global.to_owned() });
        }
        if SHADOWED_GLOBALS.contains(&global) {
            return Err(ContractError::ShadowedGlobal { name: global.to_owned() });
        }
        if !globals.insert(global) {
            return Err(ContractError::DuplicateGlobal { global: global.to_owned() });
        }
    }
    let mut class_names = HashSet::new();
    for error_class in namespaces.iter().filter_map(|namespace| namespace.error_class.as_ref()) {
        let name = error_class.name.as_str();
        if !is_usable_identifier(name) {
            return Err(ContractError::UnusableErrorClass { name: name.to_owned() });
        }
        if RESERVED_BINDING_GLOBALS.contains(&name) {
            return Err(ContractError::ReservedGlobal { name: name.to_owned() });
        }
        if SHADOWED_GLOBALS.contains(&name) {
            return Err(ContractError::ShadowedGlobal { name: name.to_owned() });
        }
        if globals.contains(name) || !class_names.insert(name) {
            return Err(ContractError::DuplicateInjectedGlobal { name: name.to_owned() });
        }
        let property = error_class.member_name_property.as_str();
        if property.is_empty()
            || RESERVED_ERROR_MEMBERS.contains(&property)
            || is_dunder_member(property)
        {
            return Err(ContractError::UnusableMemberProperty { property: property.to_owned() });
        }
    }
    for namespace in namespaces {
        for (name, function) in &namespace.functions {
            if let Err(why) = function.input_check() {
                let binding = format!("{}.{name}", namespace.global);
                return Err(ContractError::InvalidInputSchema { binding, why });
            }
            if let Err(why) = function.approval_check() {
                let binding = format!("{}.{name}", namespace.global);
                return Err(ContractError::InvalidApprovalSchema { binding, why });
            }
        }
    }
    Ok(())
}

/// Checks everything a request installs in the program: its bindings ([`validate_bindings`]),
/// then the globals beside them, in installation order. Pass 4: each function of a namespace
/// whose functions are also globals, in request and declaration order (a usable identifier, not
/// reserved, not shadowing, taken by nothing before it); pass 5: `call_tool`, when asked for (no
/// namespace, class or bare function may take its name); pass 6: each value, in request order (a
/// usable name, not reserved, not shadowing, not taken, lossless JSON, at most
/// [`MAX_VALUE_DEPTH`] levels deep).
///
/// # Errors
///
/// The first problem found, as a [`ContractError`].
pub fn validate_request(request: &CodeRunRequest) -> Result<(), ContractError> {
    validate_bindings(&request.bindings)?;
    if let Some(session) = &request.session {
        session.check()?;
    }
    let mut taken: HashSet<&str> = request.bindings.iter().map(|ns| ns.global.as_str()).collect();
    taken.extend(
        request.bindings.iter().filter_map(|ns| ns.error_class.as_ref()).map(|c| c.name.as_str()),
    );
    let free = |name: &str, taken: &HashSet<&str>| {
        if RESERVED_BINDING_GLOBALS.contains(&name) {
            return Err(ContractError::ReservedGlobal { name: name.to_owned() });
        }
        if SHADOWED_GLOBALS.contains(&name) {
            return Err(ContractError::ShadowedGlobal { name: name.to_owned() });
        }
        if taken.contains(name) {
            return Err(ContractError::DuplicateInjectedGlobal { name: name.to_owned() });
        }
        Ok(())
    };
    for namespace in request.bindings.iter().filter(|ns| ns.functions_as_globals) {
        for name in namespace.functions.keys() {
            if !is_usable_identifier(name) {
                let binding = format!("{}.{name}", namespace.global);
                return Err(ContractError::UnusableFunctionGlobal { binding });
            }
            free(name, &taken)?;
            taken.insert(name);
        }
    }
    if request.call_tool {
        free(CALL_TOOL, &taken)?;
        taken.insert(CALL_TOOL);
    }
    for (name, value) in &request.values {
        if !is_usable_identifier(name) {
            return Err(ContractError::UnusableValueName { name: name.clone() });
        }
        free(name, &taken)?;
        taken.insert(name);
        let unusable = |why: String| ContractError::UnusableValue { name: name.clone(), why };
        if json::nests_deeper_than(value, MAX_VALUE_DEPTH) {
            return Err(unusable(format!("it nests more than {MAX_VALUE_DEPTH} levels deep")));
        }
        json::validate(value).map_err(|why| unusable(format!("it is not lossless JSON: {why}")))?;
    }
    Ok(())
}
