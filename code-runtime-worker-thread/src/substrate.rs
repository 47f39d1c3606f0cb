//! The host side of one run in this process: strip the program, start its isolate thread (or
//! take one started ahead, see [`Ready`]), and drive it as the host loop's [`Substrate`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use code_runtime::Limits;
use code_runtime::provider::{
    Answer, CallId, CpuClock, Ending, Event, ProgramGlobal, ProgramGlobals, Start, Substrate,
    Teardown, reactor,
};
use futures::future::BoxFuture;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::config::WorkerThreadConfig;
use crate::isolate::{self, Setup};
use crate::message::{Inbox, Outbox, ToIsolate};
use crate::program::NamespaceSetup;
use crate::program::{Program, Shape};
use crate::termination::{Cause, Termination};
use crate::{abandonment, memory, platform, strip};

/// How long teardown waits for a stopped isolate before it terminates it again.
const RETERMINATE: Duration = Duration::from_millis(100);

/// How long a stopped run's answer waits for its isolate thread to end. V8 stops a program at
/// its next interrupt check, but a builtin under way runs to its end first (filling an array of
/// 2^27 elements, parsing a JSON text of millions of values), which may take seconds: the run
/// answers without it, within its budget and this slack, and the thread ends in the background.
const ANSWER_WITHIN: Duration = Duration::from_millis(150);

/// How long the run's slot waits for a thread still running after its answer, terminated again
/// and again, before it lets the thread go: counted out of hand (`abandonment.rs`) and joined
/// whenever it ends, so it holds no slot meanwhile but keeps others from starting while too many
/// hold too much.
const LINGER: Duration = Duration::from_millis(250);

/// One run's isolate thread, seen from the host.
pub(crate) struct IsolateSubstrate {
    events: UnboundedReceiver<Event>,
    inbox: std_mpsc::Sender<ToIsolate>,
    termination: Arc<Termination>,
    cpu_clock: Arc<OnceLock<CpuClock>>,
    /// The CPU time the host spent stripping the program, the run's.
    stripped: Duration,
    thread: Option<JoinHandle<()>>,
    /// Whether the isolate sent its ending (its last event).
    ended: bool,
    /// What the isolate may hold at most (`memory::host_bytes`), counted if it is let go.
    holds: usize,
}

/// Strips the program and makes what its isolate is built from, in either isolation mode
/// (decorators as `legacy_decorators` says). A program that does not strip starts nothing: its
/// ending is the strip error (`exception`).
pub(crate) fn program(start: Start, legacy_decorators: bool) -> Result<Program, Ending> {
    let Start { program, namespaces, limits, globals, determinism, replay, .. } = start;
    let ProgramGlobals { installed, tools } = globals;
    let mut parameters = vec!["console".to_owned()];
    parameters.extend(namespaces.iter().map(|namespace| namespace.global.clone()));
    parameters.extend(
        namespaces
            .iter()
            .filter_map(|namespace| namespace.error_class.as_ref())
            .map(|class| class.name.clone()),
    );
    let (names, globals): (Vec<String>, Vec<ProgramGlobal>) = installed.into_iter().unzip();
    parameters.extend(names);
    let namespaces: Vec<NamespaceSetup> = namespaces
        .iter()
        .map(|namespace| NamespaceSetup {
            global: namespace.global.clone(),
            names: namespace.functions.keys().cloned().collect(),
            parameters: namespace
                .functions
                .values()
                .map(|function| {
                    function
                        .parameters()
                        .map(|names| names.into_iter().map(str::to_owned).collect())
                })
                .collect(),
            error_class: namespace
                .error_class
                .as_ref()
                .map(|class| (class.name.clone(), class.member_name_property.clone())),
        })
        .collect();
    let stripped = strip::strip_program(&program, &namespaces, legacy_decorators)
        .map_err(|error| Ending::Threw(error.to_string()))?;
    Ok(Program {
        body: stripped.body,
        positions: stripped.positions,
        parameters,
        namespaces,
        globals,
        tools,
        max_output_bytes: limits.output_bytes(),
        determinism,
        replay,
    })
}

/// Programs longer than this are stripped on one of the reactor's blocking threads: stripping
/// (and compiling an `enum`) takes time that grows faster than the program, which must not hold
/// up the thread that serves other runs (an MCP server's). Shorter ones strip in tens of
/// microseconds, less than the hop would cost.
const STRIP_INLINE_BYTES: usize = 16 << 10;

/// [`program`], off the reactor for a long program ([`STRIP_INLINE_BYTES`]), with the CPU time
/// the strip took: the run's compute budget pays it (`compute_used`). Dropping the future (the
/// run's wall clock ran out) leaves a strip under way to finish on its thread; the program's
/// length bounds it ([`strip::MAX_COMPILED_BYTES`]).
pub(crate) async fn program_off_reactor(
    start: Start,
    legacy_decorators: bool,
) -> Result<(Program, Duration), Ending> {
    let inline = start.program.len() <= STRIP_INLINE_BYTES;
    let measured = move || {
        let clock = CpuClock::current_thread();
        let before = clock.map(CpuClock::used);
        let program = program(start, legacy_decorators)?;
        let used = clock.zip(before).map(|(clock, before)| clock.used().saturating_sub(before));
        Ok((program, used.unwrap_or_default()))
    };
    if inline {
        return measured();
    }
    match reactor::handle() {
        Ok(reactor) => reactor
            .spawn_blocking(measured)
            .await
            .unwrap_or_else(|_| Err(Ending::Failed("the type stripper failed".to_owned()))),
        Err(_) => measured(),
    }
}

/// What the isolates of `config` are made with under `limits`.
pub(crate) fn shape(config: &WorkerThreadConfig, limits: &Limits) -> Shape {
    Shape {
        max_memory_mb: limits.max_memory_mb,
        allow_eval: config.allow_eval,
        allow_wasm: config.allow_wasm,
    }
}

/// An isolate thread started ahead of its program: it makes its isolate at once, then waits for
/// the run (see [`Ready::start`]). Used by one run at most.
pub(crate) struct Ready {
    handoff: std_mpsc::SyncSender<(Program, Outbox, Inbox)>,
    termination: Arc<Termination>,
    cpu_clock: Arc<OnceLock<CpuClock>>,
    /// `None` once handed to a run's substrate or joined.
    thread: Option<JoinHandle<()>>,
    /// See [`IsolateSubstrate::holds`].
    holds: usize,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready").finish_non_exhaustive()
    }
}

/// Starts an isolate thread of `shape` in this process.
pub(crate) fn ready(shape: Shape) -> Result<Ready, Ending> {
    let holds = memory::host_bytes(shape.memory_bytes());
    let setup = Setup::new(shape);
    let termination = setup.termination.clone();
    let cpu_clock = setup.cpu_clock.clone();
    let (handoff, waiting) = std_mpsc::sync_channel::<(Program, Outbox, Inbox)>(1);
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("code-runtime-v8-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let thread = platform::spawn_isolate_thread(name, move || {
        let prepared = isolate::prepare(setup);
        // No program: the isolate was not needed (the provider was disposed); it is disposed of.
        if let Ok((program, host, inbox)) = waiting.recv() {
            prepared.run(program, host, inbox);
        }
    })
    .map_err(|error| Ending::Failed(format!("cannot start the isolate thread: {error}")))?;
    Ok(Ready { handoff, termination, cpu_clock, thread: Some(thread), holds })
}

/// [`ready`] on one of the reactor's blocking threads: starting an isolate thread waits for the
/// V8 launcher (for V8's initialisation, the first time), which must not hold up the reactor.
pub(crate) async fn ready_off_reactor(shape: Shape) -> Option<Ready> {
    match reactor::handle() {
        Ok(reactor) => reactor.spawn_blocking(move || ready(shape).ok()).await.ok().flatten(),
        Err(_) => ready(shape).ok(),
    }
}

/// Joins `thread` on one of the reactor's blocking threads: an isolate thread's last act is to
/// drop its channel, so the join is near, but it is a blocking call, and async code on a shared
/// runtime must not make one.
async fn joined(thread: JoinHandle<()>) {
    match reactor::handle() {
        Ok(reactor) => drop(reactor.spawn_blocking(move || thread.join()).await),
        Err(_) => drop(thread.join()),
    }
}

impl Ready {
    /// Hands `program` (whose strip took `stripped` of CPU time) to the thread: the run's
    /// substrate.
    pub(crate) fn start(mut self, program: Program, stripped: Duration) -> IsolateSubstrate {
        let (host, events) = unbounded_channel();
        let (inbox, inbox_rx) = std_mpsc::channel();
        // A thread that is gone (it panicked) closes `events`: the run ends as a failure.
        let _ = self.handoff.send((program, Outbox::Thread(host), Inbox::Thread(inbox_rx)));
        IsolateSubstrate {
            events,
            inbox,
            termination: self.termination.clone(),
            cpu_clock: self.cpu_clock.clone(),
            stripped,
            thread: self.thread.take(),
            ended: false,
            holds: self.holds,
        }
    }

    /// Ends the thread unused and joins it.
    pub(crate) async fn discard(mut self) {
        if let Some(joined) = self.end() {
            let _ = joined.await;
        }
    }

    /// Tells an unused thread to end, and joins it off the caller's thread (disposing of an
    /// isolate takes a moment).
    fn end(&mut self) -> Option<tokio::task::JoinHandle<std::thread::Result<()>>> {
        let thread = self.thread.take()?;
        // The thread's `recv` fails once the sender is gone (replaced by one nobody holds).
        drop(std::mem::replace(&mut self.handoff, std_mpsc::sync_channel(0).0));
        match reactor::handle() {
            Ok(reactor) => Some(reactor.spawn_blocking(move || thread.join())),
            // No reactor (the process is out of threads): join here.
            Err(_) => {
                let _ = thread.join();
                None
            }
        }
    }
}

/// A `Ready` nobody took or discarded (its provider was dropped) still ends its thread, joined
/// in the background.
impl Drop for Ready {
    fn drop(&mut self) {
        drop(self.end());
    }
}

impl Substrate for IsolateSubstrate {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                self.ended |= matches!(event, Event::Ended(_));
                Poll::Ready(event)
            }
            // The thread ended without a word: it panicked.
            Poll::Ready(None) => Poll::Ready(Event::Ended(Ending::Failed(
                "the isolate thread stopped unexpectedly".to_owned(),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn settle(&mut self, call: CallId, answer: Answer) {
        let _ = self.inbox.send(ToIsolate::Settle { call, answer });
    }

    fn compute_used(&self) -> Duration {
        let isolate = self.cpu_clock.get().map_or(Duration::ZERO, |clock| clock.used());
        self.stripped.saturating_add(isolate)
    }

    fn stop(&mut self) {
        // The isolate may still be starting; once it exists, it sees the recorded cause and stops.
        self.termination.stop(Cause::Host);
        let _ = self.inbox.send(ToIsolate::Stop);
    }

    fn teardown(mut self, ending: Ending) -> BoxFuture<'static, Teardown> {
        if self.ended {
            // The isolate sent its ending, its last event: the result need not wait while the
            // thread disposes of the isolate (a few hundred microseconds), only the run's slot.
            return Box::pin(async move {
                Teardown { ending, logs: Vec::new(), cleanup: Some(Box::pin(self.finish())) }
            });
        }
        Box::pin(async move {
            // The thread drops its end of the channel as its last act, after disposing of the
            // isolate; what it printed before stopping is still the program's output.
            let mut logs = Vec::new();
            let answer_by = std::time::Instant::now() + ANSWER_WITHIN;
            loop {
                let left = answer_by.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    // Still running (a builtin under way): the answer goes now.
                    return Teardown { ending, logs, cleanup: Some(Box::pin(self.finish())) };
                }
                let events = &mut self.events;
                let next =
                    reactor::enter(|| tokio::time::timeout(left.min(RETERMINATE), events.recv()));
                match next.await {
                    Ok(Some(Event::Log(line))) => logs.push(line),
                    // An abandoned thread sends its ending and never ends (`abandonment.rs`).
                    Ok(Some(Event::Ended(_))) if self.termination.is_abandoned() => {
                        return Teardown::new(ending, logs);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) if self.termination.is_abandoned() => {
                        return Teardown::new(ending, logs);
                    }
                    // Still running after a stop: terminate again (see `Termination::stop`).
                    Err(_) if self.termination.cause().is_some() => {
                        self.termination.stop(Cause::Host);
                    }
                    Err(_) => {}
                }
            }
            // The thread has returned or is about to.
            if let Some(thread) = self.thread.take() {
                joined(thread).await;
            }
            Teardown::new(ending, logs)
        })
    }
}

impl IsolateSubstrate {
    /// What is left once the run answered: the thread's end, waited for in the run's slot for at
    /// most [`LINGER`] (terminating it again meanwhile), then let go ([`abandonment::let_go`])
    /// and joined in the background whenever it ends. What it prints meanwhile is nobody's.
    async fn finish(mut self) {
        let let_go_at = std::time::Instant::now() + LINGER;
        loop {
            // An abandoned thread (marked before its ending was sent) never ends.
            if self.termination.is_abandoned() {
                return;
            }
            let events = &mut self.events;
            match reactor::enter(|| tokio::time::timeout(RETERMINATE, events.recv())).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) if std::time::Instant::now() >= let_go_at => {
                    abandonment::let_go(&self.termination, self.holds);
                    let background = async move {
                        // Terminated again and again: V8 may spend a termination while the
                        // program goes on.
                        loop {
                            let events = &mut self.events;
                            let next = tokio::time::timeout(RETERMINATE, events.recv());
                            match reactor::enter(|| next).await {
                                Ok(Some(_)) if self.termination.is_abandoned() => return,
                                Ok(Some(_)) => {}
                                Ok(None) => break,
                                Err(_) => {
                                    self.termination.stop(Cause::Host);
                                }
                            }
                        }
                        if let Some(thread) = self.thread.take() {
                            joined(thread).await;
                        }
                        abandonment::taken_back(&self.termination);
                    };
                    reactor::spawn(background);
                    return;
                }
                Err(_) => {
                    self.termination.stop(Cause::Host);
                }
            }
        }
        if let Some(thread) = self.thread.take() {
            joined(thread).await;
        }
    }
}
