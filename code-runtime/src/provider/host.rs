//! [`Host`]: the host side of every run, whatever the substrate: the checks in their fixed order,
//! the queue for a slot, and the loop that drives a [`Substrate`] to its [`Ending`].

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tracing::instrument::WithSubscriber;

use crate::binding::{BindingArgs, BindingError, CodeBindingNamespace};
use crate::checkpoint::{Decisions, Record};
use crate::error::{ConfigError, ContractError};
use crate::isolation::Isolation;
use crate::json::JsonValue;
use crate::language::Language;
use crate::limits::Limits;
use crate::provider::approvals::Approving;
use crate::provider::dispatch::Calls;
use crate::provider::hint;
use crate::provider::journal::{Journal, resumed};
use crate::provider::report::RunReport;
use crate::provider::session_turn::{Opening, open_session, session_of, settle_session};
use crate::provider::stops::{ComputeCheck, Stops};
use crate::provider::switchboard::{Switchboard, Turn};
use crate::provider::{
    Admission, BindingTable, CallId, Ending, FunctionId, Held, HostMemory, LOG_LINE_BYTES,
    OutputLedger, ProgramGlobals, RunGate, RunPermit, StopReason, reactor, shrink_result, unfenced,
    validate_request,
};
use crate::request::CodeRunRequest;
use crate::result::CodeRunResult;
use crate::runtime::CodeRuntime;
use crate::session::{Capture, SessionState, Sessions, Turn as SessionTurn};
use futures::FutureExt;

/// What a provider runs programs in: a V8 isolate on a thread, a child process in a cell.
///
/// The host loop polls [`poll_event`](Substrate::poll_event) for what the program does, answers
/// its calls with [`settle`](Substrate::settle), reads [`compute_used`](Substrate::compute_used)
/// for the compute budget, and at the end calls [`stop`](Substrate::stop) (when the host ended
/// the run) and then [`teardown`](Substrate::teardown), which must leave nothing behind, or hand
/// what is left to do to [`Teardown::cleanup`].
pub trait Substrate: Send + 'static {
    /// The next thing the program did.
    ///
    /// Cancel safety: the loop polls this beside other branches and may not poll it again after
    /// another branch won; an event is either returned or kept for the next poll, never lost.
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event>;

    /// Answers call `call`.
    fn settle(&mut self, call: CallId, answer: Answer);

    /// CPU time the program has used so far, all of it (every thread, every process of it).
    fn compute_used(&self) -> Duration;

    /// Stops the program now, mid-instruction if need be. Idempotent; the substrate need not
    /// report anything afterwards.
    fn stop(&mut self);

    /// Waits until the substrate is gone (thread joined, processes reaped, files removed) and
    /// hands back what it still held: output written before it stopped, and the ending, refined
    /// if the substrate learned more (for example the exit status behind [`Ending::Exited`]).
    fn teardown(self, ending: Ending) -> BoxFuture<'static, Teardown>;
}

/// The host's answer to one call.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Answer {
    /// A value to resolve the call with, or the rejection the program sees.
    pub outcome: Result<JsonValue, BindingError>,
    /// In a run with [`Start::determinism`]: what the program's clock reads from this answer
    /// on, in milliseconds since the Unix epoch (the substrate never lets it go back).
    pub clock_ms: Option<f64>,
}

impl Answer {
    /// An answer with `outcome`, and the clock reading of a run with
    /// [`Start::determinism`].
    pub fn new(outcome: Result<JsonValue, BindingError>, clock_ms: Option<f64>) -> Self {
        Self { outcome, clock_ms }
    }
}

/// A call a resumed run's record answers, which its substrate may answer itself, without a
/// round trip to the host ([`Start::replay`]): the substrate reports such a call as
/// [`Event::Replayed`], and gives the answers in rank order, each once its call was made and
/// every answer ranked before it was given. The host checks each against the record and ends the
/// run (`exception`, the program took another path) at the first that differs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Recorded {
    /// The function the record says the call was of; a call of another function is the host's
    /// to answer ([`Event::Call`]).
    pub function: FunctionId,
    /// The recorded answer, with the clock reading that came with it.
    pub answer: Answer,
    /// Its place among the recorded answers, from 0.
    pub rank: u64,
}

impl Recorded {
    /// The recorded answer of a call of `function`, the `rank`th to come.
    pub fn new(function: FunctionId, answer: Answer, rank: u64) -> Self {
        Self { function, answer, rank }
    }
}

/// The sources of nondeterminism of a run that may pause or that resumes: the program's
/// randomness comes from `seed`, and its clock starts at `started_ms` and moves only with the
/// host's answers ([`Answer::clock_ms`]) and by a fixed step per reading, so the program sees
/// the same numbers when it runs again from the start.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Determinism {
    /// The seed of `Math.random`, `crypto.getRandomValues`, `random`, `os.urandom`, `uuid4`.
    pub seed: u64,
    /// What the program's clock reads when it starts, in milliseconds since the Unix epoch.
    pub started_ms: f64,
}

impl Determinism {
    /// Randomness from `seed`, a clock that starts at `started_ms`.
    pub fn new(seed: u64, started_ms: f64) -> Self {
        Self { seed, started_ms }
    }

    /// How far the program's clock moves at each reading between two answers, in
    /// milliseconds: a microsecond, so a program that waits for the clock to pass a mark by
    /// reading it (`while (Date.now() < t)`) ends instead of spinning on a clock that stands
    /// still.
    pub const STEP_MS: f64 = 0.001;
}

/// What a substrate reports, in the order the program did it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// One line of output (a `console` call, a printed line).
    Log(String),
    /// A binding call; answer it with [`Substrate::settle`].
    Call {
        /// The substrate's id of the call.
        id: CallId,
        /// Which function.
        function: FunctionId,
        /// The argument (JSON `null` when the program passed none), holding its charge of the
        /// run's [`HostMemory`] when the substrate made it on the host.
        args: BindingArgs,
    },
    /// A call the substrate answered itself from [`Start::replay`]: the host checks it against
    /// the record, and gives it no answer.
    Replayed {
        /// The substrate's id of the call.
        id: CallId,
        /// Which function.
        function: FunctionId,
        /// The argument, as for [`Event::Call`].
        args: BindingArgs,
    },
    /// A call of a function the request does not have, which only a forged frame can make: the
    /// host answers it with [`Substrate::settle`] (a rejection naming it, cut short) and counts
    /// it against the run's call budget like any call, so a flood of them ends there.
    Stray {
        /// The substrate's id of the call.
        id: CallId,
        /// The name the call gave, `global.name`.
        label: String,
    },
    /// What the run's cell carries to the session's next run ([`Start::session`]), sent before
    /// the program's [`Event::Ended`]; the host bounds it and saves it.
    Captured(Capture),
    /// The program settled, or the substrate ended.
    Ended(Ending),
}

/// What [`Substrate::teardown`] leaves.
pub struct Teardown {
    /// How the run ended.
    pub ending: Ending,
    /// Output the program wrote before it stopped that the loop has not seen, in order.
    pub logs: Vec<String>,
    /// What is left to do once the result is known, which the result need not wait for (reaping
    /// a process whose namespaces the kernel is still tearing down, say). The host runs it on the
    /// reactor and holds the run's slot until it is done, so disposal still waits for it.
    pub cleanup: Option<BoxFuture<'static, ()>>,
}

impl Teardown {
    /// A teardown that left nothing to do.
    pub fn new(ending: Ending, logs: Vec<String>) -> Self {
        Self { ending, logs, cleanup: None }
    }
}

impl std::fmt::Debug for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teardown")
            .field("ending", &self.ending)
            .field("logs", &self.logs)
            .field("cleanup", &self.cleanup.as_ref().map(|_| "pending"))
            .finish()
    }
}

/// Everything a provider gets to start one run's substrate.
#[derive(Debug)]
#[non_exhaustive]
pub struct Start {
    /// The program text.
    pub program: String,
    /// The request's namespaces (validated), in request order.
    pub namespaces: Vec<CodeBindingNamespace>,
    /// The same functions in [`FunctionId`] order.
    pub table: Arc<BindingTable>,
    /// This run's budgets: the provider's, tightened by the request's.
    pub limits: Limits,
    /// The globals besides the namespaces and error classes (bare functions, `call_tool`, the
    /// request's values), to install in this order.
    pub globals: ProgramGlobals,
    /// The run's account of host memory: what the substrate holds on the host because of the
    /// program (a frame being read, the values parsed from it, answers queued for it) is charged
    /// here first; a refused charge ends the run with [`StopReason::HostMemory`].
    pub memory: HostMemory,
    /// In a run that may pause or that resumes: where the program's randomness and clock come
    /// from ([`Determinism`]); `None` lets them be the machine's.
    pub determinism: Option<Determinism>,
    /// In a resumed run: by call number (the program's `n`th call at `n - 1`), the answers the
    /// record holds, which the substrate may give itself ([`Recorded`]); `None` for a call the
    /// host answers. Empty in any other run, and a substrate may always leave every call to the
    /// host.
    pub replay: Vec<Option<Recorded>>,
    /// In a run in a session: the state its cell restores before the program (its definitions
    /// replayed, then its values), and whose successor it reports as [`Event::Captured`]. Only
    /// for a provider that [carries sessions](Provider::carries_sessions).
    pub session: Option<Arc<SessionState>>,
}

/// What a provider supplies to its [`Host`]: the language and isolation it answers, how to start
/// one run's substrate, and how to close what it keeps between runs (substrates started ahead).
/// Everything else (the checks, the gate, the host loop, disposal) is the host's, the same for
/// every provider.
pub trait Provider: Send + Sync + 'static {
    /// What a run of this provider runs in.
    type Substrate: Substrate;

    /// The language of its programs; [`CodeRuntime::language`] answers its name.
    fn language(&self) -> Language;

    /// Where its programs run, what [`CodeRuntime::isolation`] answers.
    fn isolation(&self) -> Isolation;

    /// Starts the substrate of one run; an `Err` ends the run with that ending, no substrate
    /// made.
    fn start(&self, start: Start) -> impl Future<Output = Result<Self::Substrate, Ending>> + Send;

    /// Whether its cells restore and capture a session's state ([`Start::session`]); a run in a
    /// session on a provider that does not is refused.
    fn carries_sessions(&self) -> bool {
        false
    }

    /// Closes what the provider keeps between runs (a spare substrate, say), once the host has
    /// refused new runs and every run is gone: nothing of the provider outlives it.
    fn close(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

/// The host side of a provider: its limits, its gate, the one host loop, and the
/// [`CodeRuntime`] every provider is. A provider's public type holds one and implements
/// [`Hosted`] to be a [`CodeRuntime`] too.
#[derive(Debug)]
pub struct Host<P> {
    provider: P,
    gate: RunGate,
    limits: Limits,
    /// Where its runs' sessions are kept unless a request names a store.
    sessions: Sessions,
}

/// A provider's public type: a [`CodeRuntime`] through the [`Host`] it holds, which it hands
/// out as a `dyn CodeRuntime` so the provider's own types stay private.
pub trait Hosted: Send + Sync {
    /// The host (a `Host<P>` of the crate's provider).
    fn runtime(&self) -> &dyn CodeRuntime;
}

#[async_trait]
impl<P: Provider> CodeRuntime for Host<P> {
    fn language(&self) -> Language {
        self.provider.language()
    }

    fn isolation(&self) -> Isolation {
        self.provider.isolation()
    }

    fn limits(&self) -> &Limits {
        &self.limits
    }

    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        Host::run(self, request).await
    }

    async fn dispose(&self) {
        Host::dispose(self).await;
    }
}

#[async_trait]
impl<T: Hosted> CodeRuntime for T {
    fn language(&self) -> Language {
        self.runtime().language()
    }

    fn isolation(&self) -> Isolation {
        self.runtime().isolation()
    }

    fn limits(&self) -> &Limits {
        self.runtime().limits()
    }

    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        self.runtime().run(request).await
    }

    async fn dispose(&self) {
        self.runtime().dispose().await;
    }
}

impl<P: Provider> Host<P> {
    /// A host of `provider` for runs under `limits`, at most `max_concurrent_runs` at a time.
    /// Every run's `tracing` span carries the provider's language and isolation.
    ///
    /// # Errors
    ///
    /// The first invalid setting.
    pub fn new(
        provider: P,
        limits: Limits,
        max_concurrent_runs: usize,
    ) -> Result<Self, ConfigError> {
        limits.validate()?;
        let sessions = Sessions::in_memory();
        Ok(Self { provider, gate: RunGate::new(max_concurrent_runs)?, limits, sessions })
    }

    /// The provider.
    pub fn provider(&self) -> &P {
        &self.provider
    }

    /// The provider's limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Fails the runs in flight and queued, refuses new ones, waits until every substrate is
    /// gone, then closes the provider ([`Provider::close`]). Idempotent.
    pub async fn dispose(&self) {
        self.gate.dispose().await;
        self.provider.close().await;
    }

    /// Runs `request`: the checks every provider makes, in order (disposed, bindings, per-request
    /// limits, cancelled), the program taken out of its Markdown fence ([`unfenced`]), a slot,
    /// then [`Provider::start`] to make the substrate, then the host loop until the run ends; an `exception` that names a host API the
    /// program cannot have gains a hint.
    ///
    /// # Errors
    ///
    /// The contract misuse of [`CodeRuntime::run`](crate::CodeRuntime::run).
    ///
    /// # Tracing
    ///
    /// The run's spans and events go to the `tracing` dispatcher that is current where the run
    /// is first polled, whichever threads later poll it or tear it down: it is captured then and
    /// set around every poll of the run (as `WithSubscriber::with_subscriber` does), and around
    /// its teardown on the reactor. A host that scopes its subscriber (`with_default`) and spawns
    /// the run onto another thread carries it there with `with_current_subscriber`.
    /// (tracing-core caches whether each callsite is enabled, and while exactly one dispatcher
    /// is alive and no global default is set, it asks only the default of the thread that first
    /// reaches a callsite, which may be one outside the host's scope: a host whose only
    /// subscriber is scoped keeps a second `Dispatch` alive, or sets a global default, so no
    /// callsite is cached as disabled for good.)
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the substrate and tears it down on the reactor; the run's permit
    /// is held until then, so [`dispose`](Host::dispose) waits for it.
    pub async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        let dispatch = tracing::dispatcher::get_default(tracing::Dispatch::clone);
        self.traced_run(request, dispatch.clone()).with_subscriber(dispatch).await
    }

    /// The provider's start of a run, under its wall clock (a long program's strip, say): a stop
    /// that comes first is the run's ending.
    async fn start_within(&self, setup: Start, stops: &mut Stops) -> Result<P::Substrate, Ending> {
        let mut started = None;
        let starting = async { started = Some(self.provider.start(setup).await) };
        if let Some(reason) = stops.first(starting).await {
            return Err(Ending::Stopped(reason));
        }
        started.unwrap_or_else(|| Err(Ending::Failed("the run did not start".to_owned())))
    }

    /// The session a request runs in and where it is kept, once the provider is known to carry
    /// sessions.
    fn session_of(
        &self,
        request: &CodeRunRequest,
        resumed: Option<&Record>,
    ) -> Result<Option<Opening>, ContractError> {
        let opening = session_of(request, resumed, &self.sessions)?;
        if let (Some(id), false) = (&request.session, self.provider.carries_sessions()) {
            let why = format!("{} runs here carry no sessions", self.provider.language());
            return Err(ContractError::UnusableSession { name: id.name().to_owned(), why });
        }
        Ok(opening)
    }

    /// The stops of a run that started at `started`; `Err` for one cancelled already, or
    /// whose wall clock cannot be kept.
    fn stops(
        &self,
        signal: Option<CancellationToken>,
        started: Instant,
        limits: Limits,
    ) -> Result<Stops, Ending> {
        let signal = signal.unwrap_or_default();
        if signal.is_cancelled() {
            return Err(Ending::Stopped(StopReason::Cancelled));
        }
        let disposed = self.gate.disposed().clone();
        Stops::new(signal, disposed, started, limits).map_err(|why| Ending::Failed(why.to_owned()))
    }

    async fn traced_run(
        &self,
        request: CodeRunRequest,
        dispatch: tracing::Dispatch,
    ) -> Result<CodeRunResult, ContractError> {
        let started = Instant::now();
        let mut permit = self.gate.enter()?;
        validate_request(&request)?;
        let limits = self.limits.tighten(&request.limits)?;
        let truncate = request.truncate;
        let language = self.provider.language();
        let resumed = resumed(language, &request)?;
        let session = self.session_of(&request, resumed.as_ref().map(|(record, _)| record))?;
        let CodeRunRequest {
            program, bindings, values, call_tool, signal, events, approvals, ..
        } = request;
        let (mut turn, mut captured, mut refused) = (None, None, None);
        let program = program_of(resumed.as_ref(), program);
        let mut report =
            RunReport::new(language.as_str(), self.provider.isolation().as_str(), events, started);
        let span = report.span().clone();
        let result = async {
            let ledger = OutputLedger::new(limits.output_bytes());
            let mut stops = match self.stops(signal, started, limits) {
                Ok(stops) => stops,
                Err(ending) => return ledger.settle(ending),
            };
            turn = match open_session(session, language, &mut stops).await {
                Ok(turn) => turn,
                Err(refusal) => return refusal.settle(ledger, &mut refused),
            };
            // A provider's gate is never drained: a run without a slot ends as disposal ends it.
            let slot = self.gate.slot(&mut permit).map(drop);
            let stopped = stops.first(slot).await;
            if let Some(reason) = stopped.or((!permit.has_slot()).then_some(StopReason::Disposed)) {
                return ledger.settle(Ending::Stopped(reason));
            }
            let table = Arc::new(BindingTable::new(&bindings));
            let memory =
                HostMemory::new(usize::try_from(limits.memory_bytes()).unwrap_or(usize::MAX));
            let key = approvals.as_ref().and_then(|approvals| approvals.key.clone());
            let run = (language, program.as_str(), bindings.as_slice(), call_tool);
            let (_restoring, journal) =
                match accounts(&memory, turn.as_ref(), (run, resumed, key.is_some()), &limits) {
                    Ok(accounts) => accounts,
                    Err(ending) => return ledger.settle(ending),
                };
            let globals = ProgramGlobals::plan(&bindings, values, call_tool);
            let setup = Start {
                program,
                namespaces: bindings,
                table: table.clone(),
                limits,
                globals,
                memory: memory.clone(),
                determinism: journal.as_ref().map(Journal::determinism),
                replay: journal.as_ref().map(|journal| journal.replay(&table)).unwrap_or_default(),
                session: turn.as_ref().map(|turn: &SessionTurn| turn.state().clone()),
            };
            let substrate = match self.start_within(setup, &mut stops).await {
                Ok(substrate) => substrate,
                Err(ending) => return ledger.settle(ending),
            };
            let running = Running { substrate: Some(substrate), permit: Some(permit), dispatch };
            let calls = Calls::new(table, &limits, report.span().clone());
            let approving = Approving::new(approvals, memory.clone());
            let board = Switchboard::new(calls, approving, journal, key, &limits);
            let output = Output { ledger, memory, captured: None };
            let (result, capture) = drive(running, board, output, stops, &mut report).await;
            captured = capture;
            result
        }
        .instrument(span)
        .await;
        let limits = Limits { max_sessions: self.limits.max_sessions, ..limits };
        let result = settle_session(result, (turn, refused), captured, &limits).await?;
        let result = shrunk(result, truncate).await;
        report.finish(&result);
        Ok(result)
    }
}

/// The program a run runs: a resumed run's checkpoint's, or the request's out of its fence.
fn program_of(resumed: Option<&(Record, Decisions)>, program: String) -> String {
    match resumed {
        Some((record, _)) => record.program.clone(),
        None => unfenced(&program).unwrap_or(program),
    }
}

/// What a journal is of: the language, the program, the namespaces, whether `call_tool` is given.
type RunOf<'a> = (Language, &'a str, &'a [CodeBindingNamespace], bool);

/// The run's account of host memory charged with the session state it restores, and its
/// journal (a run that may pause, or resumes); `Err` when the memory budget cannot hold them.
fn accounts(
    memory: &HostMemory,
    turn: Option<&SessionTurn>,
    (run, resumed, pausing): (RunOf<'_>, Option<(Record, Decisions)>, bool),
    limits: &Limits,
) -> Result<(Option<Held>, Option<Journal>), Ending> {
    let over = || Ending::Stopped(StopReason::HostMemory { max_memory_mb: limits.max_memory_mb });
    // The state, and its boot frame on its way to the cell (base64: a third larger).
    let restoring = |turn: &SessionTurn| turn.state().bytes().saturating_mul(7) / 3;
    let held = turn
        .map(|turn| memory.hold(usize::try_from(restoring(turn)).unwrap_or(usize::MAX)))
        .transpose()
        .map_err(|_| over())?;
    let mut journal = Journal::of_run(run, resumed, pausing, memory).map_err(|_| over())?;
    // A checkpoint of a run in a session names the state it began from, which its resume
    // must find again.
    if let (Some(journal), Some(turn)) = (journal.as_mut(), turn) {
        journal.in_session(turn.id().name(), turn.state().digest());
    }
    Ok((held, journal))
}

/// `result` shrunk to the request's budget, when it gave one: on one of the reactor's blocking
/// threads, as the result may be as large as the memory budget and the work grows with it (the
/// executor that polls the run serves others).
async fn shrunk(result: CodeRunResult, truncate: Option<usize>) -> CodeRunResult {
    let Some(max_bytes) = truncate else { return result };
    match reactor::handle() {
        Ok(reactor) => match reactor.spawn_blocking(move || shrink_result(result, max_bytes)).await
        {
            Ok(result) => result,
            // Only a bug of the shrink panics: the run's answer says so.
            Err(_) => OutputLedger::new(max_bytes)
                .settle(Ending::Failed("shrinking the result failed".to_owned())),
        },
        Err(_) => shrink_result(result, max_bytes),
    }
}

/// A run's substrate and permit. Dropped while the substrate is still held (the run future was
/// dropped), it stops the substrate and tears it down on the reactor, releasing the permit only
/// then, so disposal still waits for it.
struct Running<S: Substrate> {
    substrate: Option<S>,
    permit: Option<RunPermit>,
    /// The run's `tracing` dispatcher, for its teardown on the reactor.
    dispatch: tracing::Dispatch,
}

impl<S: Substrate> Drop for Running<S> {
    fn drop(&mut self) {
        let Some(mut substrate) = self.substrate.take() else { return };
        substrate.stop();
        let permit = self.permit.take();
        let teardown = async move {
            let teardown = substrate.teardown(Ending::Stopped(StopReason::Cancelled)).await;
            if let Some(cleanup) = teardown.cleanup {
                cleanup.await;
            }
            drop(permit);
        };
        reactor::spawn(teardown.with_subscriber(self.dispatch.clone()));
    }
}

/// The run's output as the host holds it: the ledger, and the run's account of host memory that
/// every line it keeps is charged to.
struct Output {
    ledger: OutputLedger,
    memory: HostMemory,
    /// What the cell carries to the session's next run, once it said.
    captured: Option<Capture>,
}

/// The host loop: feeds the ledger, serves calls, enforces the budgets, and settles.
async fn drive<S: Substrate>(
    mut running: Running<S>,
    mut board: Switchboard,
    mut output: Output,
    mut stops: Stops,
    report: &mut RunReport,
) -> (CodeRunResult, Option<Capture>) {
    let limits = stops.limits;
    let finish = match running.substrate.as_mut() {
        Some(substrate) => {
            until_ending(substrate, &mut board, &mut output, &mut stops, report).await
        }
        None => {
            let gone = Ending::Failed("the substrate is gone".to_owned());
            return (output.ledger.settle(gone), None);
        }
    };
    let captured = output.captured.take();
    if let Some(substrate) = running.substrate.as_ref() {
        report.measured(substrate.compute_used(), board.made());
    }
    if let Some(reason) = board.take_output_reason() {
        output.ledger.exceed_because(reason);
    }
    report.approvals(board.approvals_asked());
    let paused = matches!(finish, Finish::Paused);
    let ending = match finish {
        Finish::Ended(ending) => ending,
        Finish::Paused => {
            // The calls in flight are answered (and recorded) before the checkpoint is made.
            board.drain(report, stops.first(std::future::pending()).map(drop)).await;
            Ending::Stopped(StopReason::Cancelled)
        }
    };
    // The documented rule: calls still in flight when a run ends are cancelled (dropped).
    let table = board.table();
    let Some(substrate) = running.substrate.take() else {
        return (output.ledger.settle(hint::explained(ending, &table)), captured);
    };
    let teardown = substrate.teardown(ending).await;
    let permit = running.permit.take();
    match teardown.cleanup {
        // The result is ready; the rest happens in the background, in the run's slot.
        Some(cleanup) => {
            let cleanup = async move {
                cleanup.await;
                drop(permit);
            };
            reactor::spawn(cleanup.with_subscriber(running.dispatch.clone()));
        }
        None => drop(permit),
    }
    let mut ending = teardown.ending;
    for line in teardown.logs {
        if let Some(reason) = output.admit(report, line, &limits) {
            ending = Ending::Stopped(reason);
            break;
        }
    }
    if paused && !output.ledger.is_exceeded() {
        ending = board.paused(output.ledger.logs());
    } else {
        drop(board);
    }
    (output.ledger.settle(hint::explained(ending, &table)), captured)
}

/// How the program's part of a run ended.
enum Finish {
    /// The run ended so.
    Ended(Ending),
    /// The run pauses: the program is stopped, its calls wait for decisions.
    Paused,
}

/// Runs the program until it ends, pauses, or a stop comes: feeds the ledger, serves calls,
/// checks the budgets.
async fn until_ending<S: Substrate>(
    substrate: &mut S,
    board: &mut Switchboard,
    output: &mut Output,
    stops: &mut Stops,
    report: &mut RunReport,
) -> Finish {
    let limits = stops.limits;
    let mut compute = ComputeCheck::new(&limits);
    // What the run spent before its substrate took it (its program's strip) counts at once: the
    // next look is scheduled from the rest.
    if let Some(reason) = compute.check(substrate.compute_used()) {
        substrate.stop();
        return Finish::Ended(Ending::Stopped(reason));
    }
    loop {
        // Order: stops, then the host's own work (a settled call, a decision), then the program's
        // next event. A call the program made is served before what the program did next is
        // read: a call whose future is ready at once settles (and is recorded) even when the
        // program's end was already waiting behind it, so such a run ends the same way on
        // every machine, and the program's events cannot starve the answers it waits for.
        let turn = tokio::select! {
            biased;
            reason = stops.first(std::future::pending()) => Turn::Stop(reason.unwrap_or(StopReason::Cancelled)),
            () = compute.due() => match compute.check(substrate.compute_used()) {
                Some(reason) => Turn::Stop(reason),
                None => continue,
            },
            ready = std::future::poll_fn(|cx| board.poll_ready(cx)) => board.ready(substrate, report, ready),
            event = std::future::poll_fn(|cx| substrate.poll_event(cx)) => match event {
                Event::Log(line) => match output.admit(report, line, &limits) {
                    Some(reason) => Turn::Stop(reason),
                    None => Turn::Continue,
                },
                Event::Stray { id, label } => board.stray(substrate, report, id, &label),
                Event::Call { id, function, args } => board.call(substrate, report, (id, false), function, args),
                Event::Replayed { id, function, args } => board.call(substrate, report, (id, true), function, args),
                Event::Captured(capture) => output.capture(capture, &limits),
                Event::Ended(ending) => return Finish::Ended(ending),
            },
        };
        // The wall clock stands still while a call waits for a decision.
        if board.waits_for_decision() {
            stops.hold();
        } else {
            stops.release();
        }
        match turn {
            Turn::Continue => {}
            Turn::Stop(reason) => {
                substrate.stop();
                return Finish::Ended(Ending::Stopped(reason));
            }
            Turn::End(ending) => {
                substrate.stop();
                return Finish::Ended(ending);
            }
            Turn::Pause => {
                substrate.stop();
                stops.release();
                return Finish::Paused;
            }
        }
    }
}

impl Output {
    /// Keeps what the cell captured for the session, charging it to the run's host memory.
    fn capture(&mut self, capture: Capture, limits: &Limits) -> Turn {
        let bytes = usize::try_from(capture.bytes()).unwrap_or(usize::MAX);
        if self.memory.keep(bytes).is_err() {
            return Turn::Stop(StopReason::HostMemory { max_memory_mb: limits.max_memory_mb });
        }
        self.captured = Some(capture);
        Turn::Continue
    }

    /// Offers a line to the ledger, charging what the host will hold for it; one it keeps is an
    /// event. `Some` when the run must stop: the line outgrew the output budget, or the host
    /// memory it would take.
    fn admit(&mut self, report: &RunReport, line: String, limits: &Limits) -> Option<StopReason> {
        if self.memory.keep(line.len().saturating_add(LOG_LINE_BYTES)).is_err() {
            return Some(StopReason::HostMemory { max_memory_mb: limits.max_memory_mb });
        }
        match self.ledger.admit_log(line) {
            Admission::Admitted => {
                report.log(self.ledger.logs().last().map_or("", String::as_str));
                None
            }
            Admission::Exceeded => Some(StopReason::OutputExceeded),
        }
    }
}
