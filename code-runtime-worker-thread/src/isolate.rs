//! The isolate thread: a fresh isolate and context for one run, the program called as an async
//! function, and the loop that settles binding calls, fires timers and runs microtasks until the
//! program's promise settles or the host terminates execution.

use std::ffi::c_void;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use code_runtime::provider::{CpuClock, Ending, Event, StopReason, catalogue};
use code_runtime::{BindingError, JsonValue};
use tokio::sync::mpsc::UnboundedSender;

use crate::convert::{self, Lossy};
use crate::globals::{self, NamespaceSetup};
use crate::memory::{self, HeapGuard, MemoryBudget};
use crate::message::ToIsolate;
use crate::state::Run;
use crate::termination::{Cause, Termination};
use crate::{platform, render};

/// How often an idle isolate thread looks for foreground tasks of V8's own.
const PLATFORM_POLL: Duration = Duration::from_millis(10);

/// What the isolate thread needs, all of it `Send`.
pub(crate) struct Setup {
    /// The stripped program, wrapped (see `strip::strip_and_wrap`).
    pub(crate) source: String,
    pub(crate) column_offset: i32,
    pub(crate) namespaces: Vec<NamespaceSetup>,
    pub(crate) max_memory_mb: u64,
    pub(crate) allow_eval: bool,
    pub(crate) allow_wasm: bool,
    pub(crate) budget: Arc<MemoryBudget>,
    pub(crate) termination: Arc<Termination>,
    /// Set to the thread's CPU clock before any program code runs.
    pub(crate) cpu_clock: Arc<OnceLock<CpuClock>>,
}

/// The thread's body. Ends by sending the run's [`Ending`] unless the host stopped it (the host
/// knows why); dropping `host` at the end tells the host the isolate is gone.
pub(crate) fn run(setup: Setup, host: UnboundedSender<Event>, inbox: Receiver<ToIsolate>) {
    if let Some(cpu_clock) = CpuClock::current_thread() {
        let _ = setup.cpu_clock.set(cpu_clock);
    }
    let ending = run_isolate(&setup, &host, &inbox);
    let ending = match setup.termination.cause() {
        Some(Cause::Host) => None,
        Some(Cause::OutOfMemory) => {
            Some(Ending::Stopped(StopReason::OutOfMemory { max_memory_mb: setup.max_memory_mb }))
        }
        None => ending,
    };
    if let Some(ending) = ending {
        let _ = host.send(Event::Ended(ending));
    }
}

unsafe extern "C" fn deny_wasm(
    _context: v8::Local<'_, v8::Context>,
    _source: v8::Local<'_, v8::String>,
) -> bool {
    false
}

fn run_isolate(
    setup: &Setup,
    host: &UnboundedSender<Event>,
    inbox: &Receiver<ToIsolate>,
) -> Option<Ending> {
    let mut params = v8::CreateParams::default();
    if let Some(snapshot) = platform::snapshot() {
        params = params.snapshot_blob(v8::StartupData::from(snapshot));
    }
    let memory_bytes =
        usize::try_from(setup.max_memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let params = params
        .heap_limits(0, memory_bytes)
        .array_buffer_allocator(memory::allocator(&setup.budget).make_shared());
    let mut isolate = v8::Isolate::new(params);
    isolate.set_microtasks_policy(v8::MicrotasksPolicy::Explicit);
    isolate.set_promise_reject_callback(globals::promise_reject);
    if !setup.allow_wasm {
        isolate.set_allow_wasm_code_generation_callback(deny_wasm);
    }
    let guard = Box::new(HeapGuard {
        termination: setup.termination.clone(),
        handle: isolate.thread_safe_handle(),
        budget: setup.budget.clone(),
        refusals: Default::default(),
        unwinds: Default::default(),
    });
    let guard_data = &*guard as *const HeapGuard as *mut c_void;
    isolate.add_near_heap_limit_callback(memory::near_heap_limit, guard_data);
    setup.termination.attach(isolate.thread_safe_handle());

    let ending = {
        v8::scope!(let scope, &mut isolate);
        let context = v8::Context::new(scope, Default::default());
        let scope = &mut v8::ContextScope::new(scope, context);
        context.set_allow_generation_from_strings(setup.allow_eval);
        execute(scope, setup, host, inbox)
    };
    // The isolate (and with it every handle into it) goes before the guard its callback uses.
    drop(isolate);
    drop(guard);
    ending
}

fn execute(
    scope: &mut v8::PinScope<'_, '_>,
    setup: &Setup,
    host: &UnboundedSender<Event>,
    inbox: &Receiver<ToIsolate>,
) -> Option<Ending> {
    let Some((run, parameters)) = globals::install(scope, &setup.namespaces, host) else {
        return Some(Ending::Failed("the program's environment could not be set up".to_owned()));
    };
    scope.set_slot(run.clone());
    v8::tc_scope!(let scope, scope);
    let Some(promise) = start(scope, setup, &parameters) else {
        if scope.is_execution_terminating() {
            return None;
        }
        let exception = scope.exception().unwrap_or_else(|| v8::undefined(scope).into());
        return Some(Ending::Threw(render::exception(scope, &run.intrinsics, exception)));
    };
    run.state.borrow_mut().main = Some(v8::Global::new(scope, promise));
    loop {
        if let Some(ending) = turn(scope, setup, &run, promise) {
            return ending;
        }
        // Wake at the next timer, and at least every few milliseconds: V8's worker threads may
        // post foreground tasks (see `platform::pump`) that no message here announces.
        let next_timer =
            run.state.borrow().timers.first_key_value().map(|((deadline, _), _)| *deadline);
        let poll = Instant::now() + PLATFORM_POLL;
        let wake = next_timer.map_or(poll, |deadline| deadline.min(poll));
        match inbox.recv_timeout(wake.saturating_duration_since(Instant::now())) {
            Ok(ToIsolate::Settle { call, outcome }) => settle(scope, &run, call, outcome),
            Ok(ToIsolate::Stop) | Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {
                if let Some(ending) = fire_timers(scope, &run) {
                    return ending;
                }
            }
        }
    }
}

/// One turn of the event loop: V8's foreground tasks, microtasks, unhandled rejections, then the
/// program's promise. `Some` when the run is over (`Some(None)`: terminated).
fn turn(
    scope: &mut v8::PinScope<'_, '_>,
    setup: &Setup,
    run: &Run,
    promise: v8::Local<'_, v8::Promise>,
) -> Option<Option<Ending>> {
    platform::pump(scope);
    scope.perform_microtask_checkpoint();
    if setup.termination.cause().is_some() || scope.is_execution_terminating() {
        return Some(None);
    }
    let unhandled = run.state.borrow_mut().unhandled.drain(..).next();
    if let Some((_, reason)) = unhandled {
        let reason = v8::Local::new(scope, reason);
        return Some(Some(Ending::Threw(render::exception(scope, &run.intrinsics, reason))));
    }
    match promise.state() {
        v8::PromiseState::Fulfilled => Some(completion(scope, run, promise.result(scope))),
        v8::PromiseState::Rejected => {
            let reason = promise.result(scope);
            Some(Some(Ending::Threw(render::exception(scope, &run.intrinsics, reason))))
        }
        v8::PromiseState::Pending => {
            setup.budget.set_heap(scope.get_heap_statistics().used_heap_size());
            None
        }
    }
}

/// The program's value as the run's ending.
fn completion(
    scope: &mut v8::PinScope<'_, '_>,
    run: &Run,
    value: v8::Local<'_, v8::Value>,
) -> Option<Ending> {
    if value.is_undefined() {
        return Some(Ending::Completed(None));
    }
    match convert::from_v8(scope, &run.intrinsics, value) {
        Ok(value) => Some(Ending::Completed(Some(value))),
        Err(Lossy) if scope.is_execution_terminating() => None,
        Err(Lossy) => Some(Ending::InvalidOutput),
    }
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

/// Resolves or rejects the promise of call `call`.
fn settle(
    scope: &mut v8::PinScope<'_, '_>,
    run: &Run,
    call: u64,
    outcome: Result<JsonValue, BindingError>,
) {
    let Some((resolver, function)) = run.state.borrow_mut().pending.remove(&call) else { return };
    let resolver = v8::Local::new(scope, resolver);
    match outcome {
        Ok(value) => {
            match convert::to_v8(scope, &value) {
                Some(converted) => resolver.resolve(scope, converted),
                None => {
                    let label =
                        run.members.get(function.0 as usize).map_or("", |m| m.label.as_str());
                    let why =
                        catalogue::lossy_resolution(label, "it could not be built in the isolate");
                    let error =
                        globals::binding_error(scope, run, function, &BindingError::new(why));
                    resolver.reject(scope, error)
                }
            };
            code_runtime::json::drop_value(value);
        }
        Err(rejection) => {
            let error = globals::binding_error(scope, run, function, &rejection);
            resolver.reject(scope, error);
        }
    }
}

/// Runs every timer that is due. A throw in a callback fails the run as an exception.
fn fire_timers(scope: &mut v8::PinScope<'_, '_>, run: &Run) -> Option<Option<Ending>> {
    let now = Instant::now();
    loop {
        let due = {
            let mut state = run.state.borrow_mut();
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
                return Some(None);
            }
            let exception = tc.exception().unwrap_or_else(|| v8::undefined(tc).into());
            return Some(Some(Ending::Threw(render::exception(tc, &run.intrinsics, exception))));
        }
        tc.perform_microtask_checkpoint();
    }
}
