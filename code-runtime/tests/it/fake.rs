//! A provider whose substrate is a script the test plays: the host loop of `code_runtime::provider`
//! exercised without an engine.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use code_runtime::provider::{
    Answer, CallId, Determinism, Ending, Event, Host, Hosted, Provider, Recorded, Start, Substrate,
    Teardown,
};
use code_runtime::{BindingError, CodeRuntime, Isolation, JsonValue, Language, Limits};
use futures::future::BoxFuture;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// A provider of language `language` whose runs are played by the test through [`Script`]s.
pub(crate) struct FakeProvider {
    host: Host<Scripted>,
}

/// The provider the host runs: each run's substrate is handed to the test as a [`Script`].
pub(crate) struct Scripted {
    language: Language,
    started: UnboundedSender<Script>,
}

/// The test's end of one run's substrate.
pub(crate) struct Script {
    /// What the host loop will see, in order.
    pub(crate) events: UnboundedSender<Event>,
    /// What the host loop answered.
    pub(crate) settled: UnboundedReceiver<(CallId, Result<JsonValue, BindingError>)>,
    /// The start parameters the provider got.
    pub(crate) limits: Limits,
    pub(crate) program: String,
    pub(crate) determinism: Option<Determinism>,
    /// The answers a resumed run's record holds, by call number.
    pub(crate) replay: Vec<Option<Recorded>>,
    pub(crate) state: Arc<State>,
}

/// What happened to a substrate, as seen from outside.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) stopped: AtomicBool,
    pub(crate) torn_down: AtomicBool,
    /// CPU time the substrate reports, in microseconds.
    pub(crate) compute_us: AtomicU64,
    /// Lines handed back at teardown.
    pub(crate) late_logs: Mutex<Vec<String>>,
    /// What teardown turns an `Exited` ending into.
    pub(crate) exit_code: Mutex<Option<i32>>,
    /// When set, teardown leaves a cleanup that ends when this fires.
    pub(crate) linger: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
    /// The lingering cleanup ran to its end.
    pub(crate) cleaned_up: AtomicBool,
    /// The clock readings that came with the answers.
    pub(crate) clocks: Mutex<Vec<f64>>,
}

pub(crate) struct Fake {
    events: UnboundedReceiver<Event>,
    settled: UnboundedSender<(CallId, Result<JsonValue, BindingError>)>,
    state: Arc<State>,
}

impl Substrate for Fake {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => Poll::Ready(event),
            // The script was dropped: the substrate "died".
            Poll::Ready(None) => Poll::Ready(Event::Ended(Ending::Exited(None))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn settle(&mut self, call: CallId, answer: Answer) {
        if let Some(clock_ms) = answer.clock_ms {
            self.state.clocks.lock().unwrap().push(clock_ms);
        }
        let _ = self.settled.send((call, answer.outcome));
    }

    fn compute_used(&self) -> Duration {
        Duration::from_micros(self.state.compute_us.load(Ordering::SeqCst))
    }

    fn stop(&mut self) {
        self.state.stopped.store(true, Ordering::SeqCst);
    }

    fn teardown(self, ending: Ending) -> BoxFuture<'static, Teardown> {
        let state = self.state.clone();
        Box::pin(async move {
            // A real substrate waits for its thread or process here.
            tokio::task::yield_now().await;
            state.torn_down.store(true, Ordering::SeqCst);
            let logs = std::mem::take(&mut *state.late_logs.lock().unwrap());
            let ending = match ending {
                Ending::Exited(None) => Ending::Exited(*state.exit_code.lock().unwrap()),
                other => other,
            };
            let mut teardown = Teardown::new(ending, logs);
            if let Some(linger) = state.linger.lock().unwrap().take() {
                let state = state.clone();
                teardown.cleanup = Some(Box::pin(async move {
                    let _ = linger.await;
                    state.cleaned_up.store(true, Ordering::SeqCst);
                }));
            }
            teardown
        })
    }
}

impl FakeProvider {
    pub(crate) fn new(
        language: &'static str,
        limits: Limits,
        max_concurrent_runs: usize,
    ) -> (Arc<Self>, UnboundedReceiver<Script>) {
        let (started, scripts) = unbounded_channel();
        let language = language.parse().expect("a language");
        let host = Host::new(Scripted { language, started }, limits, max_concurrent_runs)
            .expect("valid limits");
        (Arc::new(Self { host }), scripts)
    }
}

impl Hosted for FakeProvider {
    fn runtime(&self) -> &dyn CodeRuntime {
        &self.host
    }
}

impl Provider for Scripted {
    type Substrate = Fake;

    fn language(&self) -> Language {
        self.language
    }

    fn isolation(&self) -> Isolation {
        Isolation::Thread
    }

    async fn start(&self, start: Start) -> Result<Fake, Ending> {
        let (events_tx, events) = unbounded_channel();
        let (settled, settled_rx) = unbounded_channel();
        let state = Arc::new(State::default());
        let script = Script {
            events: events_tx,
            settled: settled_rx,
            limits: start.limits,
            program: start.program.clone(),
            determinism: start.determinism,
            replay: start.replay.clone(),
            state: state.clone(),
        };
        if start.program == "fail to start" {
            return Err(Ending::Failed("no substrate today".to_owned()));
        }
        let _ = self.started.send(script);
        Ok(Fake { events, settled, state })
    }
}
