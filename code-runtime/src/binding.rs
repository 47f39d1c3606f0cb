//! Bindings: the host's async functions a program may call, grouped into namespaces.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use indexmap::IndexMap;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::approval::ApprovalRule;
use crate::input_schema::InputSchema;
use crate::json::{self, JsonValue};
use crate::memory::Held;

/// The future a [`BindingFunction`] returns.
pub type BindingFuture = Pin<Box<dyn Future<Output = Result<JsonValue, BindingError>> + Send>>;

/// A host function a program can await: one JSON argument in, one JSON value (or a
/// [`BindingError`]) out.
///
/// Cheap to clone (an `Arc`). Each call gets its own [`BindingArgs`], a detached copy of what the
/// program passed (JSON `null` when it passed nothing). The resolution must be lossless JSON (see
/// [`json`](mod@crate::json)); otherwise the program's call rejects with a message naming the binding,
/// and a `tracing` warning tells the host. (`json!(f64::NAN)` is already `null`, as in
/// `serde_json`, before the runtime sees it; no runtime can flag that one.) A closure that panics rejects
/// the call with `binding "<global>.<name>" panicked` and a `tracing` error.
///
/// # In-flight calls when a run ends
///
/// A call starts when the program makes it, awaited or not, and its future is polled before
/// the host reads what the program did next: a future ready at its first poll settles even when
/// the program ended right after the call. When the run ends (the program returned or failed, a
/// budget ran out, the request was cancelled, the runtime disposed), every call still in flight
/// is cancelled: its future is dropped at its current await point, before `run` returns. A
/// closure that must observe this holds a guard whose `Drop` does the work.
///
/// Build one with [`binding`] or [`binding_with`].
#[derive(Clone)]
pub struct BindingFunction {
    call: Arc<dyn Fn(BindingArgs) -> BindingFuture + Send + Sync>,
    signature: Arc<Signature>,
}

/// What a function tells the model about itself ([`describe`](crate::describe)), and whether its
/// calls are checked against its input schema.
#[derive(Clone, Debug, Default)]
struct Signature {
    description: Option<String>,
    input: Option<JsonValue>,
    output: Option<JsonValue>,
    validate_input: bool,
    /// `input` compiled, the first time a run needs it; shared by every clone, and reset when
    /// `input` changes.
    compiled: OnceLock<Result<Arc<InputSchema>, String>>,
    /// Which calls need the host's approval, if any.
    approval: Option<ApprovalRule>,
    /// The schema of [`ApprovalRule::When`] compiled, as `compiled` is.
    approval_compiled: OnceLock<Result<Arc<InputSchema>, String>>,
}

/// Wraps an async closure as a [`BindingFunction`].
///
/// The closure is called once per program call with the call's [`BindingArgs`] (which derefs to
/// the JSON value, so `args["q"]` works) and resolves with a [`JsonValue`] (`Ok(args.into())`
/// hands the argument back). Errors convert with `?`: any `std::error::Error`
/// (`std::io::Error`, `serde_json::Error`, …), `String` and `&str` become a [`BindingError`].
///
/// ```
/// use code_runtime::{binding, BindingError, CodeBindingNamespace};
/// use code_runtime::json;
///
/// let tools = CodeBindingNamespace::new("tools")
///     .function("echo", binding(|args| async move { Ok(args.into()) }))
///     .function("search", binding(|args| async move {
///         let query = args["q"].as_str().ok_or("q must be a string")?;
///         let page: u32 = serde_json::from_str("1")?; // `?` on serde_json::Error
///         Ok(json!({ "hits": [query], "page": page }))
///     }))
///     .function("fetch", binding(|args| async move {
///         // A rejection the program can branch on: `e.data.status` / `e.data["status"]`.
///         Err(BindingError::new("not found").with_data(json!({ "status": 404, "url": args["url"] })))
///     }));
/// # assert_eq!(tools.functions.len(), 3);
/// ```
///
/// A closure that uses state it owns clones it into each call's future; [`binding_with`] does
/// that for you:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use code_runtime::{binding, CodeBindingNamespace};
/// use code_runtime::json;
///
/// let calls = Arc::new(AtomicU64::new(0));
/// let counter = calls.clone();
/// let tools = CodeBindingNamespace::new("tools").function(
///     "count",
///     binding(move |_args| {
///         let counter = counter.clone(); // one clone per call, moved into the future
///         async move { Ok(json!(counter.fetch_add(1, Ordering::Relaxed) + 1)) }
///     }),
/// );
/// # assert_eq!(tools.functions.len(), 1);
/// ```
pub fn binding<F, Fut>(function: F) -> BindingFunction
where
    F: Fn(BindingArgs) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<JsonValue, BindingError>> + Send + 'static,
{
    BindingFunction {
        call: Arc::new(move |args| Box::pin(function(args))),
        signature: Arc::default(),
    }
}

/// Wraps an async closure that uses shared `state` as a [`BindingFunction`]: `state` is cloned
/// into each call, so the closure's future owns it.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
/// use code_runtime::{binding_with, CodeBindingNamespace};
/// use code_runtime::json;
///
/// #[derive(Clone, Default)]
/// struct Store(Arc<Mutex<HashMap<String, String>>>);
///
/// let store = Store::default();
/// let kv = CodeBindingNamespace::new("kv")
///     .function("put", binding_with(store.clone(), |store: Store, args| async move {
///         let key = args["key"].as_str().ok_or("key must be a string")?.to_owned();
///         let value = args["value"].as_str().ok_or("value must be a string")?.to_owned();
///         store.0.lock().unwrap().insert(key, value);
///         Ok(json!(true))
///     }))
///     .function("get", binding_with(store, |store: Store, args| async move {
///         let key = args["key"].as_str().ok_or("key must be a string")?;
///         Ok(json!(store.0.lock().unwrap().get(key)))
///     }));
/// # assert_eq!(kv.functions.len(), 2);
/// ```
pub fn binding_with<S, F, Fut>(state: S, function: F) -> BindingFunction
where
    S: Clone + Send + Sync + 'static,
    F: Fn(S, BindingArgs) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<JsonValue, BindingError>> + Send + 'static,
{
    binding(move |args| function(state.clone(), args))
}

impl BindingFunction {
    /// Starts one call with `args`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops the host closure's future at its current await point.
    pub fn call(&self, args: BindingArgs) -> BindingFuture {
        (self.call)(args)
    }

    /// The same function (description, schemas, approval rule, and the compiled checks, shared)
    /// calling `function` instead: for a host that declares its functions once and binds them to
    /// each run's own context (the Python package binds them to the caller's event loop).
    ///
    /// ```
    /// use code_runtime::{binding, json};
    ///
    /// let declared = binding(|_args| async { Err("not bound to a run".into()) })
    ///     .description("Echoes its argument.");
    /// let bound = declared.with_call(|args| async move { Ok(args.into_value()) });
    /// assert_eq!(bound.description_text(), Some("Echoes its argument."));
    /// ```
    #[must_use]
    pub fn with_call<F, Fut>(&self, function: F) -> BindingFunction
    where
        F: Fn(BindingArgs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JsonValue, BindingError>> + Send + 'static,
    {
        BindingFunction {
            call: Arc::new(move |args| Box::pin(function(args))),
            signature: self.signature.clone(),
        }
    }

    /// Describes the function to the model: the doc comment [`describe`](crate::describe) puts
    /// on its declaration.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.signature).description = Some(text.into());
        self
    }

    /// The JSON Schema of the function's argument, for [`describe`](crate::describe) and, with
    /// [`validate_input`](BindingFunction::validate_input), for checking each call.
    #[must_use]
    pub fn input(mut self, schema: JsonValue) -> Self {
        let signature = Arc::make_mut(&mut self.signature);
        signature.input = Some(schema);
        signature.compiled = OnceLock::new();
        self
    }

    /// Checks every call's argument against the [`input`](BindingFunction::input) schema before
    /// the closure runs. An argument that does not match rejects the call, and the closure is
    /// not called; the program catches the namespace's error class with a message naming the
    /// first failing value as a JSON Pointer:
    ///
    /// ```text
    /// binding "tools.search" was not called: its argument at /limit does not match its schema: "ten" is not of type "integer"
    /// ```
    ///
    /// and `data` `{"path": "/limit", "schemaPath": "/properties/limit/type"}`. Such a call is
    /// not counted against the run's call budgets (it is refused as a budget refusal is).
    ///
    /// The schema is compiled once, when the first run that has this function starts; a schema
    /// that does not compile, a `$ref` outside the schema (a URL or a file is never fetched), or
    /// no `input` at all makes that run a [`ContractError`](crate::ContractError). Arguments
    /// nested more than 128 levels deep are refused unchecked, and a `pattern` that needs
    /// backtracking gives up after a bounded number of steps (the argument is refused), so no
    /// program makes the check unbounded. Formats (`"format": "email"`) are not asserted.
    #[must_use]
    pub fn validate_input(mut self) -> Self {
        Arc::make_mut(&mut self.signature).validate_input = true;
        self
    }

    /// Whether calls are checked against the input schema
    /// ([`validate_input`](BindingFunction::validate_input)).
    pub fn validates_input(&self) -> bool {
        self.signature.validate_input
    }

    /// The compiled input schema of a function that validates its input: `Ok(None)` when it does
    /// not, `Err` with why the schema is unusable.
    pub(crate) fn input_check(&self) -> Result<Option<Arc<InputSchema>>, String> {
        if !self.signature.validate_input {
            return Ok(None);
        }
        let Some(schema) = &self.signature.input else {
            return Err("it validates its input but has no input schema".to_owned());
        };
        self.signature
            .compiled
            .get_or_init(|| InputSchema::compile(schema).map(Arc::new))
            .clone()
            .map(Some)
    }

    /// Makes calls need the host's approval: every call ([`ApprovalRule::Always`]) or those
    /// whose argument matches a JSON Schema ([`ApprovalRule::When`]). The request's
    /// [`Approvals`](crate::Approvals) decide each one before the closure runs, after the call
    /// budgets and the input check; without them, such a call is denied. A `When` schema that
    /// does not compile makes the run a [`ContractError`](crate::ContractError).
    ///
    /// ```
    /// use code_runtime::{binding, ApprovalRule, json};
    ///
    /// let delete = binding(|_args| async { Ok(json!(true)) }).approval(ApprovalRule::Always);
    /// let write = binding(|_args| async { Ok(json!(true)) }).approval(ApprovalRule::When(
    ///     json!({ "properties": { "force": { "const": true } }, "required": ["force"] }),
    /// ));
    /// # assert!(delete.approval_rule().is_some() && write.approval_rule().is_some());
    /// ```
    #[must_use]
    pub fn approval(mut self, rule: ApprovalRule) -> Self {
        let signature = Arc::make_mut(&mut self.signature);
        signature.approval = Some(rule);
        signature.approval_compiled = OnceLock::new();
        self
    }

    /// Which calls need approval ([`approval`](BindingFunction::approval)), if any.
    pub fn approval_rule(&self) -> Option<&ApprovalRule> {
        self.signature.approval.as_ref()
    }

    /// The compiled schema of an [`ApprovalRule::When`]: `Ok(None)` for any other rule or none,
    /// `Err` with why the schema is unusable.
    pub(crate) fn approval_check(&self) -> Result<Option<Arc<InputSchema>>, String> {
        let Some(ApprovalRule::When(schema)) = &self.signature.approval else { return Ok(None) };
        self.signature
            .approval_compiled
            .get_or_init(|| InputSchema::compile(schema).map(Arc::new))
            .clone()
            .map(Some)
    }

    /// The JSON Schema of what the function resolves with, for [`describe`](crate::describe).
    #[must_use]
    pub fn output(mut self, schema: JsonValue) -> Self {
        Arc::make_mut(&mut self.signature).output = Some(schema);
        self
    }

    /// The names positional arguments take, in order: the `properties` of an input schema that
    /// describes an object (its `type` is `"object"`, or it has no `type` and has
    /// `properties`). A program may then call `tools.query("SELECT 1")` or
    /// `tools.write(path, text)`: the providers pass `{"sql": "SELECT 1"}` and
    /// `{"path": …, "text": …}`. `None` without such a schema: one argument passes as it is.
    pub fn parameters(&self) -> Option<Vec<&str>> {
        let schema = self.signature.input.as_ref()?.as_object()?;
        let object = match schema.get("type") {
            None => true,
            Some(JsonValue::String(kind)) => kind == "object",
            Some(_) => false,
        };
        let properties = schema.get("properties")?.as_object()?;
        (object && !properties.is_empty()).then(|| properties.keys().map(String::as_str).collect())
    }

    /// The description, if one was given.
    pub fn description_text(&self) -> Option<&str> {
        self.signature.description.as_deref()
    }

    /// The argument's schema, if one was given.
    pub fn input_schema(&self) -> Option<&JsonValue> {
        self.signature.input.as_ref()
    }

    /// The resolution's schema, if one was given.
    pub fn output_schema(&self) -> Option<&JsonValue> {
        self.signature.output.as_ref()
    }
}

impl fmt::Debug for BindingFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BindingFunction(..)")
    }
}

/// The argument of one binding call: the program's value, detached from the program.
///
/// Derefs to the [`JsonValue`], so `args["q"]` and `args.as_str()` work; take the value out with
/// [`into_value`](BindingArgs::into_value), read typed fields with [`parse`](BindingArgs::parse).
/// A program can pass a value nested 1 000 000 levels deep: like every [`JsonValue`], it drops,
/// clones and prints without recursion.
pub struct BindingArgs {
    value: JsonValue,
    /// The host memory the value is charged to for its run, released when it drops.
    _held: Option<Held>,
    /// Who approved the call, when its function needs approval.
    approved_by: Option<String>,
    /// The run that made the call.
    run: Option<u64>,
}

impl BindingArgs {
    /// Wraps `value`.
    pub fn new(value: JsonValue) -> Self {
        Self { value, _held: None, approved_by: None, run: None }
    }

    /// Wraps `value`, which `held` charges to its run's host memory until the arguments drop
    /// (or the value is taken out): for providers, which make a call's value on the host.
    pub fn held(value: JsonValue, held: Held) -> Self {
        Self { value, _held: Some(held), approved_by: None, run: None }
    }

    /// Who approved this call, when its function needs approval
    /// ([`BindingFunction::approval`]): the approver's [`name`](crate::Approver::name), or
    /// `"resume"` for a decision a resume brought. For the host's own audit trail.
    pub fn approved_by(&self) -> Option<&str> {
        self.approved_by.as_deref()
    }

    /// The run that made this call: a number no other run of this process has, the same for
    /// every call of one run; `None` for arguments made outside a run. For what a host keeps per
    /// run across calls (a shared record's rotations, say).
    pub fn run(&self) -> Option<u64> {
        self.run
    }

    pub(crate) fn in_run(&mut self, run: u64) {
        self.run = Some(run);
    }

    pub(crate) fn approve(&mut self, by: &str) {
        self.approved_by = Some(by.to_owned());
    }

    /// The value itself.
    pub fn into_value(self) -> JsonValue {
        self.value
    }

    /// Deserializes the argument into `T`, reading it in place.
    ///
    /// # Errors
    ///
    /// A [`BindingError`] with serde's message when the argument does not have `T`'s shape; the
    /// program sees it as the call's rejection.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, BindingError> {
        json::from_value(&self.value).map_err(BindingError::from)
    }
}

impl Deref for BindingArgs {
    type Target = JsonValue;

    fn deref(&self) -> &JsonValue {
        &self.value
    }
}

impl DerefMut for BindingArgs {
    fn deref_mut(&mut self) -> &mut JsonValue {
        &mut self.value
    }
}

impl From<JsonValue> for BindingArgs {
    fn from(value: JsonValue) -> Self {
        Self::new(value)
    }
}

/// Serializes as the JSON value (see [`JsonValue`]'s `Serialize`).
impl Serialize for BindingArgs {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

/// A copy of the value, so `json!({ "echoed": args })` works.
impl json::ToJson for BindingArgs {
    fn to_json(&self) -> JsonValue {
        self.value.clone()
    }
}

impl From<BindingArgs> for JsonValue {
    fn from(args: BindingArgs) -> Self {
        args.into_value()
    }
}

impl fmt::Debug for BindingArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let encoded = json::encode(&self.value);
        f.debug_tuple("BindingArgs").field(&json::truncate(&encoded, 256)).finish()
    }
}

/// Why a binding call failed: the message the program sees, and optional structured data.
///
/// The program catches it as an instance of the namespace's error class (or `Error` /
/// `Exception`): `e.message` / `str(e)` is the message, `e.data` the data (`null` / `None` when
/// there is none), and the class's member-name property the member that failed.
///
/// Converts from any `std::error::Error`, `String` or `&str`, so `?` works in a binding
/// closure; the message is the error's `Display`, followed by its sources (`outer: inner`).
/// `BindingError` itself does not implement `std::error::Error` (that is what lets the blanket
/// conversion exist, as with `anyhow::Error`).
#[derive(Clone, PartialEq)]
pub struct BindingError {
    message: String,
    data: Option<JsonValue>,
    /// Whether this answer ends the run as `output-limit` instead of reaching the program.
    output_exceeded: bool,
}

impl BindingError {
    /// A rejection with `message` and no data.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), data: None, output_exceeded: false }
    }

    /// Not a rejection the program sees: the run ends now as `output-limit`, as when its own
    /// output outgrows the budget. For a budget the host keeps on what it writes because of a
    /// run, such as a record file that reached its bound.
    pub fn output_exceeded() -> Self {
        Self { output_exceeded: true, ..Self::new("the host's output budget is spent") }
    }

    /// [`output_exceeded`](BindingError::output_exceeded), saying which budget of the host's
    /// it was: the run's `output-limit` failure has `reason` as its message (where the budget
    /// is one the program's own output never touches, `outer output exceeded N bytes` would
    /// name the wrong one).
    pub fn output_exceeded_because(reason: impl Into<String>) -> Self {
        Self { output_exceeded: true, ..Self::new(reason) }
    }

    /// Whether this is [`output_exceeded`](BindingError::output_exceeded).
    pub fn is_output_exceeded(&self) -> bool {
        self.output_exceeded
    }

    /// Attaches structured data the program reads as `e.data`, for example
    /// `{"status": 429, "retryAfterMs": 1000}`. It must be lossless JSON; data that is not is
    /// replaced by `null` (with a `tracing` warning) and the message is kept.
    #[must_use]
    pub fn with_data(mut self, data: JsonValue) -> Self {
        self.data = Some(data);
        self
    }

    /// The message the program sees.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The structured data the program sees as `e.data`, if any.
    pub fn data(&self) -> Option<&JsonValue> {
        self.data.as_ref()
    }

    /// Takes the data out, leaving none.
    pub fn take_data(&mut self) -> Option<JsonValue> {
        self.data.take()
    }
}

impl<E> From<E> for BindingError
where
    E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    fn from(error: E) -> Self {
        let error = error.into();
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::new(message)
    }
}

impl fmt::Display for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let data = self.data.as_ref().map(json::encode);
        f.debug_struct("BindingError").field("message", &self.message).field("data", &data).finish()
    }
}

/// One program-visible object of bindings, named `global`, with one async member per function.
///
/// Function names are arbitrary strings, matched exactly as own entries: `__proto__`,
/// `constructor`, `my-tool` and `""` are ordinary names, and no name resolves to an inherited
/// member. The declaration is checked when a run starts; an invalid one is a
/// [`ContractError`](crate::ContractError).
#[derive(Clone, Debug, Default)]
pub struct CodeBindingNamespace {
    /// The program-visible name of the namespace object, e.g. `tools`.
    pub global: String,
    /// The members, in declaration order.
    pub functions: IndexMap<String, BindingFunction>,
    /// The error class every rejected call of this namespace is an instance of, if any.
    pub error_class: Option<CodeBindingErrorClass>,
    /// What the namespace is for, told to the model by [`describe`](crate::describe).
    pub description: Option<String>,
    /// Whether each function is also a bare global of the program, `search(…)` beside
    /// `tools.search(…)` ([`functions_as_globals`](CodeBindingNamespace::functions_as_globals)).
    pub functions_as_globals: bool,
}

impl CodeBindingNamespace {
    /// An empty namespace named `global`.
    pub fn new(global: impl Into<String>) -> Self {
        Self { global: global.into(), ..Self::default() }
    }

    /// Adds (or replaces) the member `name`.
    pub fn function(mut self, name: impl Into<String>, function: BindingFunction) -> Self {
        self.functions.insert(name.into(), function);
        self
    }

    /// Describes the namespace to the model.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Also installs each function as a bare global, for programs written in the convention of
    /// systems whose tools are plain functions (`await get_team_members("engineering")`). The
    /// namespace object stays. Each function name must then be a usable identifier that no other
    /// global of the program takes (a namespace, an error class, a value, another namespace's bare
    /// function, or a global the program needs, as for namespaces); otherwise the run is a
    /// [`ContractError`](crate::ContractError).
    pub fn functions_as_globals(mut self) -> Self {
        self.functions_as_globals = true;
        self
    }

    /// Declares the namespace's error class.
    pub fn error_class(
        mut self,
        name: impl Into<String>,
        member_name_property: impl Into<String>,
    ) -> Self {
        self.error_class = Some(CodeBindingErrorClass {
            name: name.into(),
            member_name_property: member_name_property.into(),
        });
        self
    }
}

/// A real error type the runtime injects for a namespace: a JavaScript `Error` subclass or a Python
/// `Exception` subclass, program-visible under `name`.
///
/// Every rejected call on the namespace is an instance with `name == self.name`, the host's message,
/// `data` (the rejection's structured data, or `null` / `None`), and an own property
/// `member_name_property` holding the exact member name that failed. Both strings are data; the
/// runtime knows nothing of "tools".
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodeBindingErrorClass {
    /// The class name, e.g. `ToolCallError`.
    pub name: String,
    /// The own property naming the failed member, e.g. `toolName`.
    pub member_name_property: String,
}
