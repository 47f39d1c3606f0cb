//! What the program sees, built in Rust on the isolate thread: `console`, `setTimeout` /
//! `clearTimeout`, one object per binding namespace whose members are native functions, and the
//! declared error classes; and the native callbacks behind them, which find the run through an
//! isolate slot ([`state::of`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use code_runtime::provider::{CallId, Event, FunctionId, ProgramGlobal, catalogue};
use code_runtime::{BindingArgs, BindingError, JsonValue, Limits};

use crate::builtins;
use crate::convert::{self, Refused};
use crate::entropy::Entropy;
use crate::message::Outbox;
use crate::meter::{Halt, Meter};
use crate::program::{NamespaceSetup, Program};
use crate::render;
use crate::replay::LocalReplay;
use crate::state::{
    self, Bounds, ErrorClass, Intrinsics, Member, Pending, Run, RunState, Timer, Tools,
};
use crate::termination::Cause;

/// Builds the program's environment and the run; returns the run and the wrapper's arguments
/// (`console`, the namespaces, the error classes, the other globals, in the wrapper's parameter
/// order).
pub(crate) fn install<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    program: &Program,
    host: &Outbox,
    bounds: Bounds,
) -> Option<(Rc<Run>, Vec<v8::Local<'s, v8::Value>>)> {
    let namespaces = &program.namespaces;
    let context = scope.get_current_context();
    let global = context.global(scope);
    let intrinsics = capture_intrinsics(scope, global)?;
    let console = install_console_and_timers(scope, global)?;
    let entropy = Entropy::new(program.determinism);
    builtins::install(scope, global, &entropy)?;
    let factory = error_class_factory(scope)?;
    let error = v8::Local::new(scope, &intrinsics.error);
    let mut run = Run {
        host: host.clone(),
        intrinsics,
        members: Vec::new(),
        error_classes: Vec::new(),
        tools: program.tools.as_ref().map(|tools| Tools {
            names: tools.names.iter().cloned().collect(),
            listing: tools.listing.clone(),
        }),
        output_left: Cell::new(bounds.max_output_bytes.saturating_add(1)),
        entropy,
        bounds,
        positions: program.positions.clone(),
        state: RefCell::new(RunState {
            replay: LocalReplay::new(program.replay.clone()),
            ..RunState::default()
        }),
        clone_oracle: RefCell::new(None),
    };
    let mut classes: Vec<v8::Local<'s, v8::Value>> = Vec::new();
    let mut objects: Vec<v8::Local<'s, v8::Value>> = Vec::new();
    let mut functions: Vec<v8::Local<'s, v8::Value>> = Vec::new();
    for (index, namespace) in namespaces.iter().enumerate() {
        let class = match &namespace.error_class {
            Some((name, _)) => {
                let name = v8::String::new(scope, name)?;
                let undefined = v8::undefined(scope).into();
                let class = factory.call(scope, undefined, &[error.into(), name.into()])?;
                classes.push(class);
                class.try_into().ok()?
            }
            None => error,
        };
        let member_property = namespace.error_class.as_ref().map(|(_, property)| property.clone());
        run.error_classes
            .push(ErrorClass { constructor: v8::Global::new(scope, class), member_property });
        objects.push(namespace_object(scope, index, namespace, &mut run.members, &mut functions)?);
    }
    let mut parameters = vec![console.into()];
    parameters.extend(objects);
    parameters.extend(classes);
    for global in &program.globals {
        parameters.push(match global {
            ProgramGlobal::Function(function) => *functions.get(function.index() as usize)?,
            ProgramGlobal::CallTool => v8::Function::new(scope, call_tool)?.into(),
            ProgramGlobal::Value(value) => frozen(scope, value)?,
        });
    }
    Some((Rc::new(run), parameters))
}

/// Deep-freezes a value in JavaScript, without recursion: a value may nest deeply.
const DEEP_FREEZE: &str = "(function (root) {\n\
      const open = [root];\n\
      while (open.length > 0) {\n\
        const value = open.pop();\n\
        if (typeof value !== 'object' || value === null || Object.isFrozen(value)) continue;\n\
        Object.freeze(value);\n\
        for (const key of Object.keys(value)) open.push(value[key]);\n\
      }\n\
      return root;\n\
    })";

/// A value of the request as the program sees it: converted, then frozen, so a program that
/// assigns into it gets a `TypeError` (programs run in strict mode). Runs before the program, on
/// the realm's own `Object`.
fn frozen<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: &JsonValue,
) -> Option<v8::Local<'s, v8::Value>> {
    let converted = convert::to_v8(scope, value)?;
    if !converted.is_object() {
        return Some(converted);
    }
    let source = v8::String::new(scope, DEEP_FREEZE)?;
    let freeze: v8::Local<'_, v8::Function> =
        v8::Script::compile(scope, source, None)?.run(scope)?.try_into().ok()?;
    let undefined = v8::undefined(scope).into();
    freeze.call(scope, undefined, &[converted])
}

fn capture_intrinsics(
    scope: &mut v8::PinScope<'_, '_>,
    global: v8::Local<'_, v8::Object>,
) -> Option<Intrinsics> {
    let object_prototype = v8::Object::new(scope).get_prototype(scope)?.to_object(scope)?;
    let array_prototype = v8::Array::new(scope, 0).get_prototype(scope)?.to_object(scope)?;
    let error_key = v8::String::new(scope, "Error")?;
    let error: v8::Local<'_, v8::Function> =
        global.get(scope, error_key.into())?.try_into().ok()?;
    Some(Intrinsics {
        object_prototype: v8::Global::new(scope, object_prototype),
        array_prototype: v8::Global::new(scope, array_prototype),
        error: v8::Global::new(scope, error),
    })
}

/// `console` (also a global, the same object as the parameter: one console, no silent twin) and
/// the timers.
fn install_console_and_timers<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    global: v8::Local<'s, v8::Object>,
) -> Option<v8::Local<'s, v8::Object>> {
    let console = v8::Object::new(scope);
    for method in ["log", "info", "warn", "error", "debug"] {
        let function = v8::Function::new(scope, console_log)?;
        let key = v8::String::new(scope, method)?;
        console.create_data_property(scope, key.into(), function.into())?;
    }
    for (name, value) in [
        ("console", console.into()),
        ("setTimeout", v8::Function::new(scope, set_timeout)?.into()),
        ("clearTimeout", v8::Function::new(scope, clear_timeout)?.into()),
    ] {
        let key = v8::String::new(scope, name)?;
        global.create_data_property(scope, key.into(), value)?;
    }
    Some(console)
}

/// The factory of the declared error classes (real `Error` subclasses, named), in JavaScript:
/// `class extends` has no API of its own.
const ERROR_CLASS_FACTORY: &str = "(function (Base, name) {\n\
      const C = class extends Base {};\n\
      Object.defineProperty(C, 'name', { value: name });\n\
      Object.defineProperty(C.prototype, 'name', { value: name, writable: true, configurable: true });\n\
      return C;\n\
    })";

/// The error-class factory, compiled before the program runs (tens of microseconds; a startup
/// snapshot holding it saved nothing measurable per run and cost every process its making).
fn error_class_factory<'s>(
    scope: &mut v8::PinScope<'s, '_>,
) -> Option<v8::Local<'s, v8::Function>> {
    let source = v8::String::new(scope, ERROR_CLASS_FACTORY)?;
    v8::Script::compile(scope, source, None)?.run(scope)?.try_into().ok()
}

/// A namespace object: no prototype, one native member per function, each carrying its
/// [`FunctionId`] as data; each function is also pushed to `functions`, in [`FunctionId`] order,
/// for the globals that are bare functions.
fn namespace_object<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    index: usize,
    namespace: &NamespaceSetup,
    members: &mut Vec<Member>,
    functions: &mut Vec<v8::Local<'s, v8::Value>>,
) -> Option<v8::Local<'s, v8::Value>> {
    let null = v8::null(scope).into();
    let object = v8::Object::with_prototype_and_properties(scope, null, &[], &[]);
    let mut made: Vec<v8::Local<'s, v8::Value>> = Vec::with_capacity(namespace.names.len());
    for (position, name) in namespace.names.iter().enumerate() {
        let data = v8::Integer::new_from_unsigned(scope, u32::try_from(members.len()).ok()?);
        let function = v8::Function::builder(call_binding).data(data.into()).build(scope)?;
        let key = v8::String::new(scope, name)?;
        object.create_data_property(scope, key.into(), function.into())?;
        made.push(function.into());
        let label = format!("{}.{name}", namespace.global);
        let parameters = namespace.parameters.get(position).cloned().flatten();
        members.push(Member { namespace: index, name: name.clone(), label, parameters });
    }
    functions.extend(made);
    Some(object.into())
}

/// The call's one JSON argument: `null` for none, the first as it is, or the positional
/// arguments as an object of the `positional` names.
fn argument(
    scope: &mut v8::PinScope<'_, '_>,
    intrinsics: &Intrinsics,
    given: &Given<'_, '_>,
    positional: Option<Vec<String>>,
    meter: &mut Meter<'_>,
) -> Result<JsonValue, Refused> {
    let Given { args, first, count } = *given;
    let Some(names) = positional else {
        if count == 0 {
            return Ok(JsonValue::Null);
        }
        return convert::from_v8(scope, intrinsics, args.get(first), meter);
    };
    let mut object = code_runtime::json::JsonMap::new();
    for (index, name) in names.into_iter().enumerate().take(count) {
        let value = args.get(first.saturating_add(i32::try_from(index).unwrap_or(i32::MAX)));
        // An `undefined` argument is a key left out, as `JSON.stringify` leaves it.
        if value.is_undefined() {
            continue;
        }
        match convert::from_v8(scope, intrinsics, value, meter) {
            Ok(value) => {
                object.insert(name, value);
            }
            Err(refused) => return Err(refused),
        }
    }
    Ok(JsonValue::Object(object))
}

/// An object that is not an array, a function or another exotic kind: the whole argument.
fn is_plain_object(value: v8::Local<'_, v8::Value>) -> bool {
    value.is_object() && !value.is_array() && !value.is_function()
}

fn throw_type_error(scope: &mut v8::PinScope<'_, '_>, message: &str) {
    let message = v8::String::new(scope, message).unwrap_or_else(|| v8::String::empty(scope));
    let error = v8::Exception::type_error(scope, message);
    scope.throw_exception(error);
}

/// `console.log` and its four siblings: strings verbatim, other values inspected, joined by
/// spaces, one log entry per call. A line that cannot fit in what is left of the output budget
/// ends the run as `output-limit` here, before the host is handed a copy of it.
fn console_log(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    let mut meter = Meter::new(run.output_left.get(), &run.bounds.termination);
    let mut line = String::new();
    let mut rendered = Ok(());
    for index in 0..args.length() {
        if index > 0 {
            rendered = meter.charge(1);
            line.push(' ');
        }
        rendered =
            rendered.and_then(|()| render::inspect(scope, args.get(index), &mut meter, &mut line));
        if rendered.is_err() {
            break;
        }
    }
    match rendered {
        Ok(()) => {
            run.output_left.set(meter.left());
            // The ledger counts the line as JSON (a `"` is two bytes): a line over the budget
            // that way crosses only as far as the ledger needs to see it is over.
            let clipped = code_runtime::json::clip_log(&line, run.bounds.max_output_bytes).len();
            line.truncate(clipped);
            run.host.send(Event::Log(line));
        }
        Err(Halt::TooLarge) => {
            run.output_left.set(0);
            run.bounds.termination.stop(Cause::OutputExceeded);
        }
        Err(Halt::Terminated) => {}
    }
}

/// `setTimeout(callback, ms, ...args)`: returns a numeric id.
fn set_timeout(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Ok(callback) = v8::Local::<v8::Function>::try_from(args.get(0)) else {
        throw_type_error(scope, "setTimeout: the callback must be a function");
        return;
    };
    // `number_value` may run the program's `valueOf`, which may call `setTimeout`: read it before
    // borrowing the state.
    let delay =
        args.get(1).number_value(scope).filter(|ms| ms.is_finite() && *ms > 0.0).unwrap_or(0.0);
    let Some(run) = state::of(scope) else { return };
    // The timer's handles live outside V8's heap until it fires or is cleared: charged to the
    // run's memory first (a timer of 60 000 arguments, two thousand times, held 5.7 GB).
    let count = usize::try_from(args.length().saturating_sub(2)).unwrap_or(0);
    let Some(charge) = run.bounds.budget.charge_host(Timer::host_bytes(count)) else {
        let message = "setTimeout: the run's memory cannot hold another timer";
        return crate::native::throw(scope, message, true);
    };
    let callback = v8::Global::new(scope, callback);
    let extra = (2..args.length()).map(|index| v8::Global::new(scope, args.get(index))).collect();
    // Timers share the wall clock's ceiling; a longer delay waits for it.
    let delay = Duration::from_secs_f64(delay.min(Limits::MAX_WALL_MS as f64) / 1000.0);
    let id = {
        let mut state = run.state.borrow_mut();
        state.next_timer += 1;
        let id = state.next_timer;
        let deadline = Instant::now() + delay;
        state.timers.insert((deadline, id), Timer { callback, args: extra, _charge: charge });
        state.timer_deadlines.insert(id, deadline);
        id
    };
    rv.set(v8::Number::new(scope, id as f64).into());
}

/// `clearTimeout(id)`.
fn clear_timeout(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(id) = args.get(0).number_value(scope).filter(|id| id.is_finite() && *id >= 0.0) else {
        return;
    };
    let Some(run) = state::of(scope) else { return };
    let mut state = run.state.borrow_mut();
    if let Some(deadline) = state.timer_deadlines.remove(&(id as u64)) {
        state.timers.remove(&(deadline, id as u64));
    }
}

/// A binding member. Its data is its [`FunctionId`]; it returns a promise that the host settles.
fn call_binding(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    let Some(function) = args.data().uint32_value(scope).map(FunctionId::new) else { return };
    call_member(scope, &run, function, &args, 0, rv);
}

/// `call_tool(name, args)`: the function `name` names ([`code_runtime::provider::ToolIndex`]),
/// called with the arguments after the name. A name that is not a string, or that no function
/// has, is a `TypeError` at the call.
fn call_tool(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    let Some(tools) = &run.tools else { return };
    let name = args.get(0);
    if !name.is_string() {
        throw_type_error(scope, catalogue::TOOL_NAME);
        return;
    }
    let name = name.to_rust_string_lossy(scope);
    let Some(function) = tools.names.get(&name).copied() else {
        throw_type_error(scope, &catalogue::unknown_tool(&name, &tools.listing));
        return;
    };
    call_member(scope, &run, function, &args, 1, rv);
}

/// Calls member `function` with the arguments from position `first` on. No argument is JSON
/// `null` (docs/design.md §9 item 7); more than one is a `TypeError`, unless the function has
/// positional parameters (its input schema's properties), which they then fill.
fn call_member(
    scope: &mut v8::PinScope<'_, '_>,
    run: &Run,
    function: FunctionId,
    args: &v8::FunctionCallbackArguments<'_>,
    first: i32,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(member) = run.members.get(function.index() as usize) else { return };
    let count = usize::try_from(args.length() - first).unwrap_or(0);
    match &member.parameters {
        None if count > 1 => {
            throw_type_error(scope, &catalogue::too_many_arguments(&member.label, count));
            return;
        }
        Some(names) if count > names.len() => {
            throw_type_error(scope, &catalogue::too_many_positional(&member.label, names, count));
            return;
        }
        _ => {}
    }
    // Positional arguments take the input schema's property names, unless one object (or
    // nothing, or `null`) is the whole argument, as without a schema.
    let lone = args.get(first);
    let positional = member.parameters.clone().filter(|_| {
        count > 1 || (count == 1 && !is_plain_object(lone) && !lone.is_null_or_undefined())
    });
    let Some(resolver) = v8::PromiseResolver::new(scope) else { return };
    rv.set(resolver.get_promise(scope).into());
    // The conversion runs program getters, which may call bindings and timers themselves: no
    // borrow of the state is held across it.
    let limit = run.bounds.budget.limit();
    let mut meter = Meter::new(limit, &run.bounds.termination);
    let given = Given { args, first, count };
    let converted = argument(scope, &run.intrinsics, &given, positional, &mut meter);
    // The host's copy of the argument and the call's bookkeeping count against the memory
    // budget until the call settles, so a program calling in a loop without awaiting runs out of
    // budget, not the host out of memory.
    let reserved = (limit - meter.left()).saturating_add(PENDING_CALL_BYTES);
    let refusal = match converted {
        Ok(value) if run.bounds.budget.reserve_host(reserved) => {
            let (call, given) = {
                let mut state = run.state.borrow_mut();
                state.next_call += 1;
                let call: CallId = state.next_call;
                let resolver = v8::Global::new(scope, resolver);
                state.pending.insert(call, Pending { resolver, function, reserved });
                (call, state.replay.call(call, function))
            };
            let args = BindingArgs::new(value);
            if given {
                // Answered from the record by the isolate's loop; the host checks it, and need
                // not hear of it before the next thing that needs the host.
                run.host.send_held(Event::Replayed { id: call, function, args });
            } else {
                run.host.send(Event::Call { id: call, function, args });
            }
            return;
        }
        Ok(_) => catalogue::CALLS_OVER_BUDGET.to_owned(),
        Err(Refused::Lossy) => catalogue::LOSSY_ARGUMENTS.to_owned(),
        Err(Refused::Halted(Halt::TooLarge)) => catalogue::arguments_over_budget(limit),
        Err(Refused::Halted(Halt::Terminated)) => return,
    };
    let error = binding_error(scope, run, function, &BindingError::new(refusal));
    resolver.reject(scope, error);
}

/// The arguments a call passes on: `count` of them, from position `first` of `args`.
struct Given<'a, 'c> {
    args: &'a v8::FunctionCallbackArguments<'c>,
    first: i32,
    count: usize,
}

/// What a pending call holds besides its argument: its promise, its entry here, the host's
/// future and channel message (a generous round figure; what matters is that it is not zero).
const PENDING_CALL_BYTES: usize = 1024;

/// The rejection value for a failed call of `function`: an instance of its namespace's error
/// class (or the intrinsic `Error`) with the message, `data` (the rejection's data, or `null`) and
/// the member-name property.
pub(crate) fn binding_error<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    run: &Run,
    function: FunctionId,
    rejection: &BindingError,
) -> v8::Local<'s, v8::Value> {
    let text =
        v8::String::new(scope, rejection.message()).unwrap_or_else(|| v8::String::empty(scope));
    let Some(member) = run.members.get(function.index() as usize) else {
        return v8::Exception::error(scope, text);
    };
    let class = &run.error_classes[member.namespace];
    let constructor = v8::Local::new(scope, &class.constructor);
    let Some(error) = constructor.new_instance(scope, &[text.into()]) else {
        return v8::Exception::error(scope, text);
    };
    let data = match rejection.data() {
        Some(data) => convert::to_v8(scope, data).unwrap_or_else(|| v8::null(scope).into()),
        None => v8::null(scope).into(),
    };
    let mut properties = Vec::with_capacity(2);
    if let Some(property) = &class.member_property {
        if let Some(name) = v8::String::new(scope, &member.name) {
            properties.push((property.as_str(), name.into()));
        }
    }
    properties.push(("data", data));
    for (key, value) in properties {
        if let Some(key) = v8::String::new(scope, key) {
            error.create_data_property(scope, key.into(), value);
        }
    }
    error.into()
}

/// Tracks unhandled rejections: added when a promise rejects with no handler, removed when a
/// handler arrives later. The program's own promise is the host's business, not a rejection.
pub(crate) extern "C" fn promise_reject(message: v8::PromiseRejectMessage<'_>) {
    v8::callback_scope!(unsafe scope, &message);
    let Some(run) = state::of(scope) else { return };
    let promise = message.get_promise();
    let mut state = run.state.borrow_mut();
    if state.main.as_ref().is_some_and(|main| v8::Local::new(scope, main) == promise) {
        return;
    }
    match message.get_event() {
        v8::PromiseRejectEvent::PromiseRejectWithNoHandler => {
            let value = message.get_value().unwrap_or_else(|| v8::undefined(scope).into());
            let entry = (v8::Global::new(scope, promise), v8::Global::new(scope, value));
            state.unhandled.push(entry);
        }
        v8::PromiseRejectEvent::PromiseHandlerAddedAfterReject => {
            state.unhandled.retain(|(rejected, _)| v8::Local::new(scope, rejected) != promise);
        }
        _ => {}
    }
}

/// V8's report of an exception nobody caught, outside any call of ours (a throw in a
/// `FinalizationRegistry` callback): it fails the run as `exception`, like an unhandled
/// rejection, instead of reaching the host's stdout.
pub(crate) extern "C" fn uncaught(
    message: v8::Local<'_, v8::Message>,
    exception: v8::Local<'_, v8::Value>,
) {
    // SAFETY: V8 calls the listener on the isolate's thread, inside its context.
    v8::callback_scope!(unsafe scope, message);
    let Some(run) = state::of(scope) else { return };
    let exception = v8::Global::new(scope, exception);
    run.state.borrow_mut().reported.push(exception);
}
