//! The isolate thread: a fresh isolate and context for one run, the program called as an async
//! function, and the loop that settles binding calls, fires timers and runs microtasks until the
//! program's promise settles or the host terminates execution.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;

use crate::bridge::{self, Finished, FromIsolate, Member, RunState, Shared, ToIsolate};
use crate::convert::{self, Intrinsics};
use crate::termination::{MemoryBudget, Reason, Termination};

/// How often an idle isolate thread looks for foreground tasks of V8's own.
const PLATFORM_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// What the isolate thread needs, all of it `Send`.
pub(crate) struct Setup {
    /// The stripped program, wrapped (see `strip::strip_and_wrap`).
    pub(crate) source: String,
    pub(crate) column_offset: i32,
    pub(crate) namespaces: Vec<NamespaceSetup>,
    pub(crate) memory_bytes: usize,
    pub(crate) allow_eval: bool,
    pub(crate) allow_wasm: bool,
    pub(crate) budget: Arc<MemoryBudget>,
    pub(crate) termination: Arc<Termination>,
}

pub(crate) struct NamespaceSetup {
    pub(crate) names: Vec<String>,
    pub(crate) error_class: Option<(String, String)>,
}

/// The thread's body. Always ends by sending `Finished`, after the isolate is disposed.
pub(crate) fn run(setup: Setup, host: UnboundedSender<FromIsolate>, inbox: Receiver<ToIsolate>) {
    let finished = run_isolate(&setup, &host, &inbox);
    let _ = host.send(FromIsolate::Finished(finished));
}

/// Given to the near-heap-limit callback; lives until the isolate is gone.
struct HeapGuard {
    termination: Arc<Termination>,
    handle: v8::IsolateHandle,
}

/// V8 is about to run out of heap: record why, terminate, and grant room to unwind.
unsafe extern "C" fn near_heap_limit(data: *mut c_void, current: usize, _initial: usize) -> usize {
    // SAFETY: `data` is the `HeapGuard` boxed in `run_isolate`, alive until after the isolate.
    let guard = unsafe { &*(data as *const HeapGuard) };
    guard.termination.claim(Reason::OutOfMemory);
    guard.handle.terminate_execution();
    // Room to unwind the terminated script; the run ends right after.
    current.saturating_mul(2)
}

unsafe extern "C" fn deny_wasm(
    _context: v8::Local<'_, v8::Context>,
    _source: v8::Local<'_, v8::String>,
) -> bool {
    false
}

fn run_isolate(
    setup: &Setup,
    host: &UnboundedSender<FromIsolate>,
    inbox: &Receiver<ToIsolate>,
) -> Finished {
    let mut params = v8::CreateParams::default();
    if let Some(snapshot) = crate::platform::snapshot() {
        params = params.snapshot_blob(v8::StartupData::from(snapshot));
    }
    let params = params
        .heap_limits(0, setup.memory_bytes)
        .array_buffer_allocator(crate::termination::allocator(&setup.budget).make_shared());
    let mut isolate = v8::Isolate::new(params);
    isolate.set_microtasks_policy(v8::MicrotasksPolicy::Explicit);
    isolate.set_promise_reject_callback(bridge::promise_reject);
    if !setup.allow_wasm {
        isolate.set_allow_wasm_code_generation_callback(deny_wasm);
    }
    let guard = Box::new(HeapGuard {
        termination: setup.termination.clone(),
        handle: isolate.thread_safe_handle(),
    });
    isolate
        .add_near_heap_limit_callback(near_heap_limit, &*guard as *const HeapGuard as *mut c_void);
    let mut clock: libc::clockid_t = 0;
    // SAFETY: pthread_getcpuclockid writes one clockid_t for the calling thread.
    let cpu_clock = (unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0)
        .then_some(clock);
    setup.termination.attach(isolate.thread_safe_handle());
    let _ = host.send(FromIsolate::Started { cpu_clock });

    let finished = {
        v8::scope!(let scope, &mut isolate);
        let context = v8::Context::new(scope, Default::default());
        let scope = &mut v8::ContextScope::new(scope, context);
        execute(scope, context, setup, host, inbox)
    };
    // The isolate (and with it every handle into it) goes before the guard its callback uses.
    drop(isolate);
    drop(guard);
    finished
}

fn execute(
    scope: &mut v8::PinScope<'_, '_>,
    context: v8::Local<'_, v8::Context>,
    setup: &Setup,
    host: &UnboundedSender<FromIsolate>,
    inbox: &Receiver<ToIsolate>,
) -> Finished {
    context.set_allow_generation_from_strings(setup.allow_eval);
    let Some((shared, parameters)) = install(scope, setup, host) else {
        return Finished::Threw(
            "the runtime could not set up the program's environment".to_owned(),
        );
    };
    scope.set_slot(shared.clone());

    v8::tc_scope!(let scope, scope);
    let Some(promise) = start(scope, setup, &parameters) else {
        if setup.termination.reason().is_some() || scope.is_execution_terminating() {
            return Finished::Terminated;
        }
        let exception = scope.exception().unwrap_or_else(|| v8::undefined(scope).into());
        return Finished::Threw(render_exception(scope, &shared, exception));
    };
    shared.borrow_mut().main = Some(v8::Global::new(scope, promise));

    loop {
        crate::platform::pump(scope);
        scope.perform_microtask_checkpoint();
        if setup.termination.reason().is_some() || scope.is_execution_terminating() {
            return Finished::Terminated;
        }
        let unhandled = shared.borrow_mut().unhandled.drain(..).next();
        if let Some((_, reason)) = unhandled {
            let reason = v8::Local::new(scope, reason);
            return Finished::Threw(render_exception(scope, &shared, reason));
        }
        match promise.state() {
            v8::PromiseState::Fulfilled => {
                let value = promise.result(scope);
                if value.is_undefined() {
                    return Finished::Completed(None);
                }
                let converted = {
                    let state = shared.borrow();
                    let intrinsics = &state.intrinsics as *const Intrinsics;
                    drop(state);
                    // SAFETY: the intrinsics live in the run state, untouched during a conversion.
                    convert::from_v8(scope, unsafe { &*intrinsics }, value)
                };
                return match converted {
                    Ok(value) => Finished::Completed(Some(value)),
                    Err(convert::Lossy) if scope.is_execution_terminating() => Finished::Terminated,
                    Err(convert::Lossy) => Finished::InvalidOutput,
                };
            }
            v8::PromiseState::Rejected => {
                let reason = promise.result(scope);
                return Finished::Threw(render_exception(scope, &shared, reason));
            }
            v8::PromiseState::Pending => {}
        }
        let heap = scope.get_heap_statistics().used_heap_size();
        setup.budget.set_heap(heap);

        // Wake at the next timer, and at least every few milliseconds: V8's worker threads may
        // post foreground tasks (see `platform::pump`) that no message here announces.
        let next_timer =
            shared.borrow().timers.first_key_value().map(|((deadline, _), _)| *deadline);
        let poll = Instant::now() + PLATFORM_POLL;
        let wake = next_timer.map_or(poll, |deadline| deadline.min(poll));
        let message = inbox.recv_timeout(wake.saturating_duration_since(Instant::now()));
        match message {
            Ok(ToIsolate::Settle { call, outcome }) => settle(scope, &shared, call, outcome),
            Ok(ToIsolate::Stop) | Err(RecvTimeoutError::Disconnected) => {
                return Finished::Terminated;
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(finished) = fire_timers(scope, &shared) {
                    return finished;
                }
            }
        }
    }
}

/// Builds the program's environment and the run state; returns the wrapper's arguments.
fn install<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    setup: &Setup,
    host: &UnboundedSender<FromIsolate>,
) -> Option<(Shared, Vec<v8::Local<'s, v8::Value>>)> {
    let context = scope.get_current_context();
    let global = context.global(scope);
    let object_prototype = v8::Object::new(scope).get_prototype(scope)?;
    let array_prototype = v8::Array::new(scope, 0).get_prototype(scope)?;
    let error_key = v8::String::new(scope, "Error")?;
    let error: v8::Local<'s, v8::Function> =
        global.get(scope, error_key.into())?.try_into().ok()?;
    let intrinsics = Intrinsics {
        object_prototype: v8::Global::new(scope, object_prototype.to_object(scope)?),
        array_prototype: v8::Global::new(scope, array_prototype.to_object(scope)?),
        error: v8::Global::new(scope, error),
    };

    let console = v8::Object::new(scope);
    for method in ["log", "info", "warn", "error", "debug"] {
        let function = v8::Function::new(scope, bridge::console_log)?;
        let key = v8::String::new(scope, method)?;
        console.create_data_property(scope, key.into(), function.into())?;
    }
    // The global `console` is the same object as the parameter: one console, no silent twin.
    for (name, value) in [
        ("console", console.into()),
        ("setTimeout", v8::Function::new(scope, bridge::set_timeout)?.into()),
        ("clearTimeout", v8::Function::new(scope, bridge::clear_timeout)?.into()),
    ] {
        let key = v8::String::new(scope, name)?;
        global.create_data_property(scope, key.into(), value)?;
    }

    // Error classes: real subclasses of the intrinsic `Error`, named by the consumer.
    // The error-class factory comes with the startup snapshot, parked on the global object under
    // a name the program never sees: it is taken off before the program runs.
    let factory_key = v8::String::new(scope, crate::platform::BOOTSTRAP_GLOBAL)?;
    let parked = global.get(scope, factory_key.into()).filter(|value| value.is_function());
    let factory: v8::Local<'s, v8::Function> = match parked {
        Some(factory) => {
            global.delete(scope, factory_key.into())?;
            factory.try_into().ok()?
        }
        // No snapshot (it could not be made): the same source, compiled here.
        None => {
            let source = v8::String::new(scope, crate::platform::BOOTSTRAP_SOURCE)?;
            v8::Script::compile(scope, source, None)?.run(scope)?;
            let factory = global.get(scope, factory_key.into())?;
            global.delete(scope, factory_key.into())?;
            factory.try_into().ok()?
        }
    };
    let undefined = v8::undefined(scope).into();
    let mut error_classes = Vec::new();
    let mut class_values: Vec<v8::Local<'s, v8::Value>> = Vec::new();
    let mut namespace_values: Vec<v8::Local<'s, v8::Value>> = Vec::new();
    let mut members = Vec::new();
    for (index, namespace) in setup.namespaces.iter().enumerate() {
        match &namespace.error_class {
            Some((name, property)) => {
                let name_value = v8::String::new(scope, name)?;
                let class: v8::Local<'s, v8::Function> = factory
                    .call(scope, undefined, &[error.into(), name_value.into()])?
                    .try_into()
                    .ok()?;
                error_classes.push((v8::Global::new(scope, class), Some(property.clone())));
                class_values.push(class.into());
            }
            None => error_classes.push((v8::Global::new(scope, error), None)),
        }
        let null = v8::null(scope).into();
        let object = v8::Object::with_prototype_and_properties(scope, null, &[], &[]);
        for name in &namespace.names {
            let data = v8::Integer::new_from_unsigned(scope, u32::try_from(members.len()).ok()?);
            let function =
                v8::Function::builder(bridge::call_binding).data(data.into()).build(scope)?;
            let key = v8::String::new(scope, name)?;
            object.create_data_property(scope, key.into(), function.into())?;
            members.push(Member { namespace: index, name: name.clone() });
        }
        namespace_values.push(object.into());
    }

    let state = RunState {
        host: host.clone(),
        intrinsics,
        members,
        error_classes,
        pending: HashMap::new(),
        next_call: 0,
        timers: BTreeMap::new(),
        timer_deadlines: HashMap::new(),
        next_timer: 0,
        unhandled: Vec::new(),
        main: None,
    };
    let mut parameters = vec![console.into()];
    parameters.extend(namespace_values);
    parameters.extend(class_values);
    Some((Rc::new(RefCell::new(state)), parameters))
}

/// Compiles the wrapper and calls it; `None` when compilation or the call threw.
fn start<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    setup: &Setup,
    parameters: &[v8::Local<'s, v8::Value>],
) -> Option<v8::Local<'s, v8::Promise>> {
    let source = v8::String::new(scope, &setup.source)?;
    let name = v8::String::new(scope, "program")?;
    let origin = v8::ScriptOrigin::new(
        scope,
        name.into(),
        0,
        setup.column_offset,
        false,
        0,
        None,
        false,
        false,
        false,
        None,
    );
    let wrapper: v8::Local<'s, v8::Function> =
        v8::Script::compile(scope, source, Some(&origin))?.run(scope)?.try_into().ok()?;
    let undefined = v8::undefined(scope).into();
    wrapper.call(scope, undefined, parameters)?.try_into().ok()
}

fn settle(
    scope: &mut v8::PinScope<'_, '_>,
    shared: &Shared,
    call: u64,
    outcome: Result<code_runtime::JsonValue, String>,
) {
    let Some((resolver, member)) = shared.borrow_mut().pending.remove(&call) else { return };
    let resolver = v8::Local::new(scope, resolver);
    match outcome {
        Ok(value) => {
            match convert::to_v8(scope, &value) {
                Some(converted) => {
                    resolver.resolve(scope, converted);
                }
                None => {
                    let error = bridge::binding_error(
                        scope,
                        shared,
                        member,
                        "binding resolution must be lossless JSON",
                    );
                    resolver.reject(scope, error);
                }
            }
            code_runtime::json::drop_value(value);
        }
        Err(message) => {
            let error = bridge::binding_error(scope, shared, member, &message);
            resolver.reject(scope, error);
        }
    }
}

/// Runs every timer that is due. A throw in a callback fails the run as an exception.
fn fire_timers(scope: &mut v8::PinScope<'_, '_>, shared: &Shared) -> Option<Finished> {
    let now = Instant::now();
    loop {
        let due = {
            let mut state = shared.borrow_mut();
            let key =
                *state.timers.first_key_value().filter(|((deadline, _), _)| *deadline <= now)?.0;
            state.timer_deadlines.remove(&key.1);
            state.timers.remove(&key)?
        };
        v8::tc_scope!(let tc, scope);
        let callback = v8::Local::new(tc, due.callback);
        let args: Vec<v8::Local<'_, v8::Value>> =
            due.args.into_iter().map(|arg| v8::Local::new(tc, arg)).collect();
        let undefined = v8::undefined(tc).into();
        if callback.call(tc, undefined, &args).is_none() {
            if tc.is_execution_terminating() {
                return Some(Finished::Terminated);
            }
            let exception = tc.exception().unwrap_or_else(|| v8::undefined(tc).into());
            return Some(Finished::Threw(render_exception(tc, shared, exception)));
        }
        tc.perform_microtask_checkpoint();
    }
}

/// The message of a thrown value (REFERENCE.md §3.9): an `Error` of this realm gives its `stack`
/// (or its `message`), anything else `String(value)`; if rendering throws, a fixed text.
fn render_exception(
    scope: &mut v8::PinScope<'_, '_>,
    shared: &Shared,
    value: v8::Local<'_, v8::Value>,
) -> String {
    const UNRENDERABLE: &str = "program threw an unrenderable value";
    v8::tc_scope!(let tc, scope);
    let error_prototype = {
        let state = shared.borrow();
        let error = v8::Local::new(tc, &state.intrinsics.error);
        let key = v8::String::new(tc, "prototype");
        key.and_then(|key| error.get(tc, key.into()))
    };
    let is_error = match (value.to_object(tc).filter(|_| value.is_object()), error_prototype) {
        (Some(object), Some(error_prototype)) => {
            // Walk the prototype chain against the intrinsic `Error.prototype`: the program may
            // have replaced `Error`, `instanceof` and `Symbol.hasInstance`.
            let mut current = object.get_prototype(tc);
            let mut found = false;
            let mut steps = 0;
            while let Some(prototype) = current.filter(|p| !p.is_null()) {
                if prototype.strict_equals(error_prototype) {
                    found = true;
                    break;
                }
                steps += 1;
                if steps > 10_000 {
                    break;
                }
                current = prototype.to_object(tc).and_then(|p| p.get_prototype(tc));
            }
            found
        }
        _ => false,
    };
    let rendered = if is_error {
        let object = value.to_object(tc);
        let stack_key = v8::String::new(tc, "stack");
        let stack = object.zip(stack_key).and_then(|(object, key)| object.get(tc, key.into()));
        match stack {
            Some(stack) if !stack.is_null_or_undefined() => {
                stack.to_string(tc).map(|s| s.to_rust_string_lossy(tc))
            }
            _ => {
                let message_key = v8::String::new(tc, "message");
                let message =
                    object.zip(message_key).and_then(|(object, key)| object.get(tc, key.into()));
                message.and_then(|m| m.to_string(tc)).map(|s| s.to_rust_string_lossy(tc))
            }
        }
    } else {
        value.to_string(tc).map(|s| s.to_rust_string_lossy(tc))
    };
    match rendered {
        Some(text) if !tc.has_caught() => text,
        _ => UNRENDERABLE.to_owned(),
    }
}
