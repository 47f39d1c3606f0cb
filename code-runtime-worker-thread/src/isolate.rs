//! The isolate thread: a fresh isolate and context for one run (made before the program is
//! known, see [`prepare`]), the program called as an async function, and the loop that settles binding calls, fires timers and runs microtasks until the
//! program's promise settles or the host terminates execution.

use std::ffi::c_void;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use code_runtime::provider::{CpuClock, Ending, Event, StopReason, catalogue};
use code_runtime::{BindingError, JsonValue};

use crate::convert::{self, Refused};
use crate::globals;
use crate::memory::{self, HeapGuard, MemoryBudget, Unwinding};
use crate::message::{Inbox, Outbox, ToIsolate};
use crate::meter::{Halt, Meter};
use crate::program::{Program, Shape};
use crate::shedding::{self, SoleThread};
use crate::state::{Bounds, Pending, Run};
use crate::termination::{Cause, Termination};
use crate::{abandonment, platform, render, state};

/// How often an idle isolate thread looks for foreground tasks of V8's own.
const PLATFORM_POLL: Duration = Duration::from_millis(10);

/// What the isolate thread shares with whoever watches it, all of it `Send`.
pub(crate) struct Setup {
    pub(crate) shape: Shape,
    pub(crate) budget: Arc<MemoryBudget>,
    pub(crate) termination: Arc<Termination>,
    /// Set to the thread's CPU clock before the isolate is made.
    pub(crate) cpu_clock: Arc<OnceLock<CpuClock>>,
    /// What V8 calls instead of aborting when it runs out of memory past every limit: a cell's
    /// handler (which reports it to the host before the cell ends); `None` in the host's
    /// process, where the run ends instead (`abandonment.rs`).
    pub(crate) out_of_memory: Option<v8::OomErrorCallback>,
    /// Give back what the run no longer uses the first time it waits (`shedding.rs`): a cell's
    /// process, whose memory is the run's alone and whose isolate thread is the only one that
    /// runs (`None` in the host's process, whose allocator and threads are the host's).
    pub(crate) shed_when_idle: Option<SoleThread>,
}

impl Setup {
    /// A setup whose budget, termination and clock are new.
    pub(crate) fn new(shape: Shape) -> Self {
        Self {
            shape,
            budget: Arc::new(MemoryBudget::new(shape.memory_bytes())),
            termination: Arc::default(),
            cpu_clock: Arc::default(),
            out_of_memory: None,
            shed_when_idle: None,
        }
    }
}

/// A fresh isolate and context, made on the thread that will run a program in them, before the
/// program is known.
pub(crate) struct Prepared {
    isolate: v8::OwnedIsolate,
    /// `None` when the environment could not be made.
    context: Option<v8::Global<v8::Context>>,
    /// What the near-heap-limit callback reads: outlives the isolate.
    guard: Box<HeapGuard>,
    setup: Setup,
}

unsafe extern "C" fn deny_wasm(
    _context: v8::Local<'_, v8::Context>,
    _source: v8::Local<'_, v8::String>,
) -> bool {
    false
}

/// Makes the isolate and its context for `setup` on this thread.
pub(crate) fn prepare(setup: Setup) -> Prepared {
    if let Some(cpu_clock) = CpuClock::current_thread() {
        let _ = setup.cpu_clock.set(cpu_clock);
    }
    let params = v8::CreateParams::default()
        .heap_limits(0, setup.shape.memory_bytes())
        .array_buffer_allocator(memory::allocator(&setup.budget).make_shared());
    let mut isolate = v8::Isolate::new(params);
    isolate.set_microtasks_policy(v8::MicrotasksPolicy::Explicit);
    isolate.set_promise_reject_callback(globals::promise_reject);
    // Without a listener, V8 prints an exception nobody catches (one thrown by a
    // `FinalizationRegistry` callback, say) to the process's stdout: the host's.
    isolate.add_message_listener(globals::uncaught);
    isolate.set_oom_error_handler(setup.out_of_memory.unwrap_or(abandonment::out_of_memory));
    if !setup.shape.allow_wasm {
        isolate.set_allow_wasm_code_generation_callback(deny_wasm);
    }
    let guard = Box::new(HeapGuard {
        termination: setup.termination.clone(),
        handle: isolate.thread_safe_handle(),
        budget: setup.budget.clone(),
        refusals: Default::default(),
        unwinds: Default::default(),
        unwinding: match setup.out_of_memory {
            Some(_) => Unwinding::Cell,
            None => Unwinding::Host,
        },
    });
    let guard_data = &*guard as *const HeapGuard as *mut c_void;
    isolate.add_near_heap_limit_callback(memory::near_heap_limit, guard_data);
    setup.termination.attach(isolate.thread_safe_handle());
    let context = {
        v8::scope!(let scope, &mut isolate);
        let context = v8::Context::new(scope, Default::default());
        let scope = &mut v8::ContextScope::new(scope, context);
        context.set_allow_generation_from_strings(setup.shape.allow_eval);
        (setup.shape.allow_wasm || remove_webassembly(scope, context))
            .then(|| v8::Global::new(scope, context))
    };
    Prepared { isolate, context, guard, setup }
}

impl Prepared {
    /// Gives back what making the isolate left behind, as a run that waits does
    /// ([`shedding::shed`]): for a cell made ahead, which waits for its run.
    pub(crate) fn shed_while_waiting(&mut self) {
        if let Some(sole) = &self.setup.shed_when_idle {
            shedding::shed(&mut self.isolate, sole);
        }
    }

    /// Runs `program` to its end, sends the ending unless the host stopped the run (the host
    /// knows why), then disposes of the isolate. Dropping `host` at the end tells the host the
    /// isolate is gone.
    pub(crate) fn run(mut self, program: Program, host: Outbox, inbox: Inbox) {
        let outcome = match self.context.take() {
            Some(context) => {
                v8::scope!(let scope, &mut self.isolate);
                let context = v8::Local::new(scope, context);
                let scope = &mut v8::ContextScope::new(scope, context);
                let setup = &self.setup;
                let max_memory_mb = setup.shape.max_memory_mb;
                let watch =
                    abandonment::watch(&host, &setup.termination, &self.guard, max_memory_mb);
                let outcome = execute(scope, setup, &program, &host, &inbox);
                drop(watch);
                // A terminated `structuredClone` leaves its serializer behind: it goes while the
                // isolate is entered, not among the slots V8's teardown drops.
                if let Some(run) = state::of(scope) {
                    run.clone_oracle.take();
                }
                outcome
            }
            None => Outcome::Ended(Ending::Failed(
                "the program's environment could not be set up".to_owned(),
            )),
        };
        let setup = &self.setup;
        let ending = match (setup.termination.cause(), outcome) {
            (Some(Cause::Host), _) | (None, Outcome::Terminated) => None,
            (Some(Cause::OutOfMemory), _) => Some(Ending::Stopped(StopReason::OutOfMemory {
                max_memory_mb: setup.shape.max_memory_mb,
            })),
            (Some(Cause::OutputExceeded), _) => Some(Ending::Stopped(StopReason::OutputExceeded)),
            (None, Outcome::Ended(ending)) => Some(ending),
        };
        if let Some(ending) = ending {
            host.send(Event::Ended(ending));
        }
        // The isolate (and with it every handle into it) goes before the guard its callback
        // uses.
        let Prepared { isolate, guard, .. } = self;
        drop(isolate);
        drop(guard);
    }
}

/// Takes the `WebAssembly` namespace away: refusing code generation is not enough, as
/// `WebAssembly.Memory` needs none and its pages are V8's own, outside the ArrayBuffer allocator
/// that charges the memory budget.
fn remove_webassembly(
    scope: &mut v8::PinScope<'_, '_>,
    context: v8::Local<'_, v8::Context>,
) -> bool {
    let global = context.global(scope);
    let Some(key) = v8::String::new(scope, "WebAssembly") else { return false };
    global.delete(scope, key.into()) == Some(true)
}

/// How the program's run on the isolate ended, as the isolate thread saw it.
enum Outcome {
    /// It ended this way.
    Ended(Ending),
    /// It was terminated; the termination's cause says why (the host, the heap, the output
    /// budget), and a host stop needs no ending sent.
    Terminated,
}

fn execute(
    scope: &mut v8::PinScope<'_, '_>,
    setup: &Setup,
    program: &Program,
    host: &Outbox,
    inbox: &Inbox,
) -> Outcome {
    let bounds = Bounds {
        termination: setup.termination.clone(),
        budget: setup.budget.clone(),
        max_output_bytes: program.max_output_bytes,
    };
    let Some((run, parameters)) = globals::install(scope, program, host, bounds) else {
        return Outcome::Ended(Ending::Failed(
            "the program's environment could not be set up".to_owned(),
        ));
    };
    scope.set_slot(run.clone());
    v8::tc_scope!(let scope, scope);
    let Some(promise) = start(scope, program, &parameters) else {
        if scope.is_execution_terminating() {
            return Outcome::Terminated;
        }
        let exception = scope.exception().unwrap_or_else(|| v8::undefined(scope).into());
        return threw(scope, &run, exception);
    };
    run.state.borrow_mut().main = Some(v8::Global::new(scope, promise));
    let mut idled = false;
    loop {
        if let Some(ending) = turn(scope, setup, &run, promise) {
            return ending;
        }
        // A resumed run's recorded answers, given here without a round trip; their reactions
        // run in the next turn.
        let replayed = run.state.borrow_mut().replay.due();
        if !replayed.is_empty() {
            for (call, answer) in replayed {
                if let Some(clock_ms) = answer.clock_ms {
                    run.entropy.advance(clock_ms);
                }
                settle(scope, &run, call, answer.outcome);
            }
            continue;
        }
        // Wake at the next timer, and at least every few milliseconds: V8's worker threads may
        // post foreground tasks (see `platform::pump`) that no message here announces.
        let next_timer =
            run.state.borrow().timers.first_key_value().map(|((deadline, _), _)| *deadline);
        let poll = Instant::now() + PLATFORM_POLL;
        let wake = next_timer.map_or(poll, |deadline| deadline.min(poll));
        // What the host has not heard yet goes before the isolate waits for it.
        host.flush();
        match inbox.recv_timeout(wake.saturating_duration_since(Instant::now())) {
            Ok(ToIsolate::Settle { call, answer }) => {
                if let Some(clock_ms) = answer.clock_ms {
                    run.entropy.advance(clock_ms);
                }
                settle(scope, &run, call, answer.outcome);
            }
            Ok(ToIsolate::Stop) | Err(RecvTimeoutError::Disconnected) => {
                return Outcome::Terminated;
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(ending) = fire_timers(scope, &run) {
                    return ending;
                }
                // Once, the first time the loop woke with no message from the host (a poll's
                // length after it began to wait), so no answer waits behind it.
                if let Some(sole) = setup.shed_when_idle.as_ref().filter(|_| !idled) {
                    idled = true;
                    shedding::shed(scope, sole);
                }
            }
        }
    }
}

/// One turn of the event loop: V8's foreground tasks, microtasks, unhandled rejections, then the
/// program's promise. `Some` when the run is over, `None` while the program runs.
fn turn(
    scope: &mut v8::PinScope<'_, '_>,
    setup: &Setup,
    run: &Run,
    promise: v8::Local<'_, v8::Promise>,
) -> Option<Outcome> {
    platform::pump(scope);
    scope.perform_microtask_checkpoint();
    if setup.termination.cause().is_some() || scope.is_execution_terminating() {
        return Some(Outcome::Terminated);
    }
    let unhandled = {
        let mut state = run.state.borrow_mut();
        let reported = state.reported.drain(..).next();
        reported.or_else(|| state.unhandled.drain(..).next().map(|(_, reason)| reason))
    };
    if let Some(reason) = unhandled {
        let reason = v8::Local::new(scope, reason);
        return Some(threw(scope, run, reason));
    }
    match promise.state() {
        v8::PromiseState::Fulfilled => Some(completion(scope, run, promise.result(scope))),
        v8::PromiseState::Rejected => {
            let reason = promise.result(scope);
            Some(threw(scope, run, reason))
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
) -> Outcome {
    if value.is_undefined() {
        return Outcome::Ended(Ending::Completed(None));
    }
    if value.is_function() {
        return Outcome::Ended(Ending::ReturnedFunction);
    }
    let mut meter = Meter::new(run.output_left.get(), &run.bounds.termination);
    match convert::from_v8(scope, &run.intrinsics, value, &mut meter) {
        Ok(value) => Outcome::Ended(Ending::Completed(Some(value))),
        Err(Refused::Halted(Halt::TooLarge)) => {
            Outcome::Ended(Ending::Stopped(StopReason::OutputExceeded))
        }
        Err(Refused::Halted(Halt::Terminated)) => Outcome::Terminated,
        Err(Refused::Lossy) if scope.is_execution_terminating() => Outcome::Terminated,
        Err(Refused::Lossy) => Outcome::Ended(Ending::InvalidOutput),
    }
}

/// The run's ending for a thrown `value`: its rendering, metered like output (a message that
/// cannot fit is `output-limit`), or [`Outcome::Terminated`] if the run was terminated while it
/// was rendered.
fn threw(scope: &mut v8::PinScope<'_, '_>, run: &Run, value: v8::Local<'_, v8::Value>) -> Outcome {
    let mut meter = Meter::new(run.output_left.get(), &run.bounds.termination);
    match render::exception(scope, &run.intrinsics, value, &mut meter) {
        // A compiled program's positions are the printed text's: put back to the program's.
        Ok(text) if !run.positions.is_empty() => {
            Outcome::Ended(Ending::Threw(run.positions.restore(&text)))
        }
        Ok(text) => Outcome::Ended(Ending::Threw(text)),
        Err(Halt::TooLarge) => Outcome::Ended(Ending::Stopped(StopReason::OutputExceeded)),
        Err(Halt::Terminated) => Outcome::Terminated,
    }
}

/// The text before the program's body. The outer function is compiled with
/// `ScriptCompiler::CompileFunction`, which parses its source as a function body and nothing
/// else: a program that closes the async function early (`return 1 }, evil(), async function () {`)
/// is still inside the outer function, in strict mode, and the host calls the function it
/// compiled, never one the program made. The async function is returned, not called, so a
/// program's stack traces show its own frames only.
const BODY_PREFIX: &str = "\"use strict\"; return async function () {";
const BODY_SUFFIX: &str = "\n};";

/// Compiles the program and calls it; `None` when compilation or the call threw.
fn start<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    program: &Program,
    parameters: &[v8::Local<'s, v8::Value>],
) -> Option<v8::Local<'s, v8::Promise>> {
    let source = format!("{BODY_PREFIX}{}{BODY_SUFFIX}", program.body);
    let source = v8::String::new(scope, &source)?;
    let name = v8::String::new(scope, "program")?;
    let column_offset = -i32::try_from(BODY_PREFIX.len()).unwrap_or(0);
    let origin = v8::ScriptOrigin::new(
        scope,
        name.into(),
        0,
        column_offset,
        false,
        0,
        None,
        false,
        false,
        false,
        None,
    );
    let names = program
        .parameters
        .iter()
        .map(|name| v8::String::new(scope, name))
        .collect::<Option<Vec<_>>>()?;
    let mut source = v8::script_compiler::Source::new(source, Some(&origin));
    let outer = v8::script_compiler::compile_function(
        scope,
        &mut source,
        &names,
        &[],
        v8::script_compiler::CompileOptions::NoCompileOptions,
        v8::script_compiler::NoCacheReason::NoReason,
    )?;
    let undefined = v8::undefined(scope).into();
    let program: v8::Local<'s, v8::Function> =
        outer.call(scope, undefined, parameters)?.try_into().ok()?;
    program.call(scope, undefined, &[])?.try_into().ok()
}

/// Resolves or rejects the promise of call `call`.
fn settle(
    scope: &mut v8::PinScope<'_, '_>,
    run: &Run,
    call: u64,
    outcome: Result<JsonValue, BindingError>,
) {
    let Some(Pending { resolver, function, reserved }) =
        run.state.borrow_mut().pending.remove(&call)
    else {
        return;
    };
    run.bounds.budget.release_host(reserved);
    let resolver = v8::Local::new(scope, resolver);
    match outcome {
        Ok(value) => {
            match convert::to_v8(scope, &value) {
                Some(converted) => resolver.resolve(scope, converted),
                None => {
                    let label =
                        run.members.get(function.index() as usize).map_or("", |m| m.label.as_str());
                    let why =
                        catalogue::lossy_resolution(label, "it could not be built in the isolate");
                    let error =
                        globals::binding_error(scope, run, function, &BindingError::new(why));
                    resolver.reject(scope, error)
                }
            };
        }
        Err(rejection) => {
            let error = globals::binding_error(scope, run, function, &rejection);
            resolver.reject(scope, error);
        }
    }
}

/// Runs every timer that is due. A throw in a callback fails the run as an exception; `Some`
/// when the run is over.
fn fire_timers(scope: &mut v8::PinScope<'_, '_>, run: &Run) -> Option<Outcome> {
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
                return Some(Outcome::Terminated);
            }
            let exception = tc.exception().unwrap_or_else(|| v8::undefined(tc).into());
            return Some(threw(tc, run, exception));
        }
        tc.perform_microtask_checkpoint();
    }
}
