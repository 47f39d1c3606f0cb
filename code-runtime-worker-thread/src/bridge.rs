//! What the program sees, built in Rust on the isolate thread: `console`, `setTimeout` /
//! `clearTimeout`, one object per binding namespace whose members are native functions, and the
//! declared error classes. Native callbacks find the run's state in an isolate slot.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use code_runtime::JsonValue;
use tokio::sync::mpsc::UnboundedSender;

use crate::convert::{self, Intrinsics};

/// What the isolate thread tells the host.
#[derive(Debug)]
pub(crate) enum FromIsolate {
    /// The isolate exists (its handle is attached to the run's `Termination`): its thread's CPU
    /// clock.
    Started { cpu_clock: Option<libc::clockid_t> },
    /// One console line.
    Log(String),
    /// A binding call: the member's index in [`Member`] order, and the detached argument.
    Call { call: u64, member: usize, args: JsonValue },
    /// The program settled, or the isolate stopped; the isolate is disposed already.
    Finished(Finished),
}

/// How the program ended, as the isolate saw it.
#[derive(Debug)]
pub(crate) enum Finished {
    Completed(Option<JsonValue>),
    Threw(String),
    InvalidOutput,
    /// Execution was terminated; the host knows why.
    Terminated,
}

/// What the host sends the isolate thread.
#[derive(Debug)]
pub(crate) enum ToIsolate {
    /// A binding call settled: a value, or the message the program's error will carry.
    Settle { call: u64, outcome: Result<JsonValue, String> },
    /// Wake up and stop: the host has terminated execution.
    Stop,
}

/// One binding member: which namespace, which name.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) namespace: usize,
    pub(crate) name: String,
}

/// The per-run state native callbacks reach through the isolate slot.
pub(crate) struct RunState {
    pub(crate) host: UnboundedSender<FromIsolate>,
    pub(crate) intrinsics: Intrinsics,
    pub(crate) members: Vec<Member>,
    /// Per namespace: the error constructor and the member-name property, or the intrinsic
    /// `Error` and no property.
    pub(crate) error_classes: Vec<(v8::Global<v8::Function>, Option<String>)>,
    pub(crate) pending: HashMap<u64, (v8::Global<v8::PromiseResolver>, usize)>,
    pub(crate) next_call: u64,
    pub(crate) timers: BTreeMap<(Instant, u64), Timer>,
    pub(crate) timer_deadlines: HashMap<u64, Instant>,
    pub(crate) next_timer: u64,
    /// Rejections nobody handled yet (the program's own promise excluded).
    pub(crate) unhandled: Vec<(v8::Global<v8::Promise>, v8::Global<v8::Value>)>,
    pub(crate) main: Option<v8::Global<v8::Promise>>,
}

pub(crate) struct Timer {
    pub(crate) callback: v8::Global<v8::Function>,
    pub(crate) args: Vec<v8::Global<v8::Value>>,
}

pub(crate) type Shared = Rc<RefCell<RunState>>;

pub(crate) fn state(scope: &v8::PinScope<'_, '_>) -> Shared {
    scope
        .get_slot::<Shared>()
        .cloned()
        .expect("the run state is installed before any program code runs")
}

/// Whether `name` prints without quotes as an object key (Node's rule, ASCII only).
pub(crate) fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// `console.log` and its four siblings: strings verbatim, other values inspected, joined by
/// spaces, one log entry per call.
pub(crate) fn console_log(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    let mut line = String::new();
    for index in 0..args.length() {
        if index > 0 {
            line.push(' ');
        }
        line.push_str(&convert::inspect(scope, args.get(index)));
    }
    let host = state(scope).borrow().host.clone();
    let _ = host.send(FromIsolate::Log(line));
}

/// `setTimeout(callback, ms, ...args)`: returns a numeric id.
pub(crate) fn set_timeout(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Ok(callback) = v8::Local::<v8::Function>::try_from(args.get(0)) else {
        let message = v8::String::new(scope, "setTimeout: the callback must be a function")
            .expect("short string");
        let error = v8::Exception::type_error(scope, message);
        scope.throw_exception(error);
        return;
    };
    let delay =
        args.get(1).number_value(scope).filter(|ms| ms.is_finite() && *ms > 0.0).unwrap_or(0.0);
    let callback = v8::Global::new(scope, callback);
    let extra = (2..args.length()).map(|index| v8::Global::new(scope, args.get(index))).collect();
    let shared = state(scope);
    let mut state = shared.borrow_mut();
    state.next_timer += 1;
    let id = state.next_timer;
    let deadline = Instant::now() + Duration::from_secs_f64(delay.min(2_147_483_647.0) / 1000.0);
    state.timers.insert((deadline, id), Timer { callback, args: extra });
    state.timer_deadlines.insert(id, deadline);
    drop(state);
    rv.set(v8::Number::new(scope, id as f64).into());
}

/// `clearTimeout(id)`.
pub(crate) fn clear_timeout(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(id) = args.get(0).number_value(scope).filter(|id| id.is_finite() && *id >= 0.0) else {
        return;
    };
    let shared = state(scope);
    let mut state = shared.borrow_mut();
    if let Some(deadline) = state.timer_deadlines.remove(&(id as u64)) {
        state.timers.remove(&(deadline, id as u64));
    }
}

/// A binding member. Its data is the member's index; it returns a promise that the host settles.
pub(crate) fn call_binding(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(member) = args.data().uint32_value(scope).map(|index| index as usize) else { return };
    let Some(resolver) = v8::PromiseResolver::new(scope) else { return };
    rv.set(resolver.get_promise(scope).into());
    let shared = state(scope);
    // No argument at all is `undefined`: not lossless, and the host is never asked.
    let converted = if args.length() == 0 {
        Err(convert::Lossy)
    } else {
        let intrinsics_ready = shared.borrow();
        let intrinsics = &intrinsics_ready.intrinsics as *const Intrinsics;
        drop(intrinsics_ready);
        // SAFETY: `intrinsics` points into the run state, which outlives this callback and is not
        // mutated during a conversion (conversions never touch the state).
        convert::from_v8(scope, unsafe { &*intrinsics }, args.get(0))
    };
    match converted {
        Ok(value) => {
            let mut state = shared.borrow_mut();
            state.next_call += 1;
            let call = state.next_call;
            state.pending.insert(call, (v8::Global::new(scope, resolver), member));
            let _ = state.host.send(FromIsolate::Call { call, member, args: value });
        }
        Err(convert::Lossy) => {
            let error =
                binding_error(scope, &shared, member, "binding arguments must be lossless JSON");
            resolver.reject(scope, error);
        }
    }
}

/// The rejection value for a failed call of `member`: an instance of its namespace's error class
/// (or the intrinsic `Error`) with the member-name property set.
pub(crate) fn binding_error<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    shared: &Shared,
    member: usize,
    message: &str,
) -> v8::Local<'s, v8::Value> {
    let (constructor, property, name) = {
        let state = shared.borrow();
        let member = &state.members[member];
        let (constructor, property) = &state.error_classes[member.namespace];
        (v8::Local::new(scope, constructor), property.clone(), member.name.clone())
    };
    let text = v8::String::new(scope, message).unwrap_or_else(|| v8::String::empty(scope));
    let Some(error) = constructor.new_instance(scope, &[text.into()]) else {
        return v8::Exception::error(scope, text);
    };
    if let Some(property) = property {
        if let (Some(key), Some(value)) =
            (v8::String::new(scope, &property), v8::String::new(scope, &name))
        {
            error.create_data_property(scope, key.into(), value.into());
        }
    }
    error.into()
}

/// Tracks unhandled rejections: added when a promise rejects with no handler, removed when a
/// handler arrives later. The program's own promise is the host's business, not a rejection.
pub(crate) extern "C" fn promise_reject(message: v8::PromiseRejectMessage<'_>) {
    v8::callback_scope!(unsafe scope, &message);
    let Some(shared) = scope.get_slot::<Shared>().cloned() else { return };
    let promise = message.get_promise();
    let mut state = shared.borrow_mut();
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
