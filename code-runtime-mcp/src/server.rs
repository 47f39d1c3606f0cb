//! The MCP server the client sees: `run_code`, whose description carries the declarations of
//! every binding, and `search_tools` / `describe_tools` for catalogues too big to read at once.

// The logging API of MCP (notifications/message, logging/setLevel) is deprecated by SEP-2577 in
// rmcp, and still what clients implement.
#![allow(deprecated, reason = "MCP logging is what clients implement today")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use code_runtime::json;
use code_runtime::json::JsonValue;
use code_runtime::provider::{RunGate, RunPermit};
use code_runtime::{
    Approvals, Checkpoint, CheckpointKey, CodeBindingNamespace, CodeRunRequest, CodeRunResult,
    CodeRuntime, ContractError, EventSink, Language, RunEvent, SpentCheckpoints, describe_request,
};
use code_runtime_fixtures::Recorder;
use futures::future::BoxFuture;
use indexmap::IndexMap;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, LoggingLevel, LoggingMessageNotificationParam, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::approval::{ClientApprover, Fallback};
use crate::kept::{self, KeptCheckpoints};
use crate::lookup;
use crate::metrics::Metrics;
use crate::passthrough::Passthrough;
use crate::relay::Downstream;

use self::arguments::{DescribeTools, ResumeRun, RunCode, SearchTools};
use self::tools::{describe_tools_tool, resume_run_tool, run_code_tool, search_tools_tool};
use code_runtime::SessionId;

mod arguments;
mod handler;
mod owner;
mod tools;

/// How many of a run's log lines go out as notifications; the rest are counted in one last
/// notification (the result has every line). A program that prints millions of lines would
/// otherwise send the client millions of messages, each a copy held until it is sent.
const LOG_NOTIFICATIONS: usize = 1000;

/// The providers a server runs programs on, by language, in the config's order.
pub(crate) type Runtimes = Vec<(Language, Arc<dyn CodeRuntime>)>;

/// How the server's runs are approved: the fallback for a client without elicitation, and the
/// key that signs a paused run's checkpoint (with the `pause` fallback).
pub(crate) struct ApprovalSetup {
    pub(crate) fallback: Fallback,
    pub(crate) key: Option<CheckpointKey>,
    /// Where resumed checkpoints are remembered; `None`: this process remembers.
    pub(crate) spent: Option<Arc<dyn SpentCheckpoints>>,
    /// Where checkpoints too large to travel are kept (`kept.rs`).
    pub(crate) kept: Arc<dyn KeptCheckpoints>,
    /// The `--record` file, where each call the user denied gets its line (the others are
    /// recorded by their upstream binding).
    pub(crate) record: Recorder,
}

impl ApprovalSetup {
    /// `approvals` signing and checking checkpoints with the key, each resumed once.
    fn signing(&self, approvals: Approvals) -> Approvals {
        let Some(key) = &self.key else { return approvals };
        let approvals = approvals.checkpoint_key(key.clone());
        match &self.spent {
            Some(spent) => approvals.spent_checkpoints(spent.clone()),
            None => approvals,
        }
    }
}

/// What the server shares with its HTTP endpoints: the counters of `/metrics`, and the gate of
/// runs that a drain closes (at most `max_concurrent_runs` at once, the rest wait their turn in
/// order; once draining, new runs and the ones still waiting are refused).
#[derive(Clone)]
pub(crate) struct Serving {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) gate: Arc<RunGate>,
}

/// Why a run was not admitted.
pub(crate) const DRAINING: &str =
    "the server is shutting down and takes no new runs: run the program again (on another replica)";

/// Admits a run through `gate` and waits for its slot; refused ([`DRAINING`]) once draining,
/// also while it waits.
async fn admit(gate: &RunGate) -> Result<RunPermit, &'static str> {
    // Admitted first: a drain that starts while this run waits for its slot waits for it too.
    let mut permit = gate.enter().map_err(|_| DRAINING)?;
    if gate.slot(&mut permit).await { Ok(permit) } else { Err(DRAINING) }
}

/// What every run's program sees.
pub(crate) struct Catalogue {
    pub(crate) namespaces: Vec<CodeBindingNamespace>,
    pub(crate) values: IndexMap<String, JsonValue>,
    pub(crate) call_tool: bool,
    /// The bytes each result is shrunk to, if any.
    pub(crate) result_bytes: Option<usize>,
    /// The packages a Python program can import beyond the standard library, `(name, version)`.
    pub(crate) python_packages: Vec<(String, String)>,
}

impl Catalogue {
    fn request(&self, program: String) -> CodeRunRequest {
        CodeRunRequest {
            program,
            bindings: self.namespaces.clone(),
            // The values were checked (at most 256 levels deep) when the server was made, so the
            // clone's recursion is bounded.
            values: self.values.clone(),
            call_tool: self.call_tool,
            truncate: self.result_bytes,
            ..CodeRunRequest::default()
        }
    }
}

/// The server: one per process, shared by every session; each session's copy has a number of
/// its own ([`CodeModeServer::for_session`]).
#[derive(Clone)]
pub(crate) struct CodeModeServer {
    inner: Arc<Inner>,
    session: u64,
}

/// The last session number given.
static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct Inner {
    catalogue: Catalogue,
    /// What `search_tools` looks in, made from the catalogue once.
    index: lookup::SearchIndex,
    /// In the config's order; the first is the default language.
    runtimes: Runtimes,
    /// The tools, in the order the client lists them.
    tools: Vec<Tool>,
    /// Each tool's handler, with its typed arguments.
    router: ToolRouter<CodeModeServer>,
    /// The lowest level of log notification the client asked for (`logging/setLevel`).
    level: AtomicU8,
    approval: ApprovalSetup,
    serving: Serving,
    passthrough: Passthrough,
}

impl CodeModeServer {
    /// A server over `catalogue`, running programs on `runtimes`.
    ///
    /// # Errors
    ///
    /// The contract error of a catalogue no run would accept.
    pub(crate) fn new(
        catalogue: Catalogue,
        runtimes: Runtimes,
        approval: ApprovalSetup,
        serving: Serving,
        passthrough: Passthrough,
    ) -> Result<Self, String> {
        let mut declarations = Vec::new();
        for (language, _) in &runtimes {
            let text = describe_request(&catalogue.request(String::new()), language)
                .map_err(|error| error.to_string())?;
            declarations.push((language.as_str().to_owned(), text));
        }
        let languages: Vec<&str> = runtimes.iter().map(|(language, _)| language.as_str()).collect();
        let pausing = approval.fallback == Fallback::Pause;
        let mut routes = vec![
            ToolRoute::new(
                run_code_tool(&catalogue, &languages, &declarations, pausing),
                Self::run_code,
            ),
            ToolRoute::new(search_tools_tool(), Self::search_tools),
            ToolRoute::new(describe_tools_tool(&languages), Self::describe_tools),
        ];
        if pausing {
            routes.push(ToolRoute::new(resume_run_tool(), Self::resume_run));
        }
        let tools = routes.iter().map(|route| route.attr.clone()).collect();
        let router = routes.into_iter().fold(ToolRouter::new(), ToolRouter::with_route);
        let inner = Inner {
            index: lookup::SearchIndex::new(&catalogue.namespaces),
            catalogue,
            runtimes,
            tools,
            router,
            level: AtomicU8::new(level_rank(LoggingLevel::Debug)),
            approval,
            serving,
            passthrough,
        };
        Ok(Self { inner: Arc::new(inner), session: 0 }.for_session())
    }

    /// The server for a new client session: what an upstream server asks during a call is
    /// relayed only within one session (`relay.rs`).
    pub(crate) fn for_session(&self) -> Self {
        let session = SESSIONS.fetch_add(1, Ordering::Relaxed) + 1;
        Self { inner: self.inner.clone(), session }
    }

    /// `run_code {code, language?, session?}`: a session named is the calling client's.
    fn run_code(
        &self,
        Parameters(RunCode { code, language, session }): Parameters<RunCode>,
        context: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<CallToolResult, ErrorData>> {
        Box::pin(async move {
            let runtime = self.runtime(language.as_deref())?;
            let mut request = self.inner.catalogue.request(code);
            if let Some(name) = session {
                let owner = owner::owner(&context, self.session);
                request = request.session(SessionId::new(name).owned_by(owner));
            }
            self.execute(runtime, request, context).await
        })
    }

    /// `resume_run {checkpoint, allow?, deny?}`: a paused run continued with the client's
    /// decisions; a checkpoint this server (or a replica with its key) did not sign is refused.
    fn resume_run(
        &self,
        Parameters(arguments): Parameters<ResumeRun>,
        context: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<CallToolResult, ErrorData>> {
        Box::pin(async move {
            let invalid = |why: String| ErrorData::invalid_params(why, None);
            if let Some(signature) = kept::handle(&arguments.checkpoint) {
                let store = self.inner.approval.kept.clone();
                let signature = signature.to_owned();
                let found = lookup::off_the_executor(move || store.take(&signature)).await?;
                // Like a checkpoint refused, the model's to read: a failed tool result.
                let Some(text) = found.map_err(invalid)? else {
                    let why = format!(
                        "no checkpoint is kept under this handle: a handle is taken by the \
                         first resume_run that names it, on the server that paused the run (or \
                         a replica sharing its store), within {} hours",
                        kept::KEPT_FOR.as_secs() / 3600
                    );
                    return Ok(CallToolResult::error(vec![ContentBlock::text(why)]));
                };
                let checkpoint =
                    Checkpoint::from_json(&text).map_err(|e| invalid(e.to_string()))?;
                return self.resume(checkpoint, &arguments, context).await;
            }
            let checkpoint = match &arguments.checkpoint {
                serde_json::Value::String(text) => Checkpoint::from_json(text),
                object @ serde_json::Value::Object(_) => {
                    Checkpoint::from_json(&json::encode(&JsonValue::from(object)))
                }
                _ => return Err(invalid("resume_run's checkpoint is the paused run's".into())),
            }
            .map_err(|error| invalid(error.to_string()))?;
            self.resume(checkpoint, &arguments, context).await
        })
    }

    /// Runs `checkpoint` on with the decisions of `arguments`.
    async fn resume(
        &self,
        checkpoint: Checkpoint,
        arguments: &ResumeRun,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let runtime = self.runtime(checkpoint.language())?;
        // A run that paused in a session resumes in it: the calling client's session of that
        // name, which must still hold the state the run began with.
        let session = checkpoint
            .session()
            .map(|name| SessionId::new(name).owned_by(owner::owner(&context, self.session)));
        let request = CodeRunRequest {
            resume: CodeRunRequest::resuming(checkpoint, arguments.decisions()).resume,
            session,
            ..self.inner.catalogue.request(String::new())
        };
        self.execute(runtime, request, context).await
    }

    /// Runs `request` on `runtime`: its logs go out as notifications, its calls that need
    /// approval to the client's user, and its result back as the tool's.
    async fn execute(
        &self,
        runtime: Arc<dyn CodeRuntime>,
        request: CodeRunRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let Serving { metrics, gate } = &self.inner.serving;
        let admitted = {
            let _queued = metrics.queued();
            tokio::select! {
                admitted = admit(gate) => admitted,
                () = context.ct.cancelled() => Err("the client cancelled the run before it started"),
            }
        };
        let _permit = match admitted {
            Ok(permit) => permit,
            Err(why) => return Ok(CallToolResult::error(vec![ContentBlock::text(why)])),
        };
        let _running = metrics.in_flight();
        let started = std::time::Instant::now();
        let result = self.execute_admitted(runtime.clone(), request, context).await;
        metrics.run_ended(runtime.language().as_str(), result.as_ref().ok(), started.elapsed());
        match result {
            Ok(result) if result.paused().is_some() => {
                // Encoding and keeping a checkpoint of hundreds of megabytes takes a while.
                let store = self.inner.approval.kept.clone();
                let text = lookup::off_the_executor(move || kept::paused_text(&result, &*store));
                Ok(match text.await? {
                    Ok(text) => tool_text(text, true),
                    Err(why) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "the run paused, and its checkpoint, too large to send, could not be kept: \
                         {why}"
                    ))]),
                })
            }
            Ok(result) => Ok(tool_result(&result)),
            // A checkpoint refused is the model's to read (it may have edited what it handed
            // back): a failed tool result, not a protocol error.
            Err(error @ ContractError::Checkpoint(_)) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())]))
            }
            Err(error) => Err(ErrorData::invalid_params(error.to_string(), None)),
        }
    }

    /// [`execute`](Self::execute) once the run has its slot.
    async fn execute_admitted(
        &self,
        runtime: Arc<dyn CodeRuntime>,
        request: CodeRunRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CodeRunResult, ContractError> {
        // Logs go out as notifications, in order, each before the result: the sink only queues
        // them (it runs inside the host loop), this task sends them, and the result waits for
        // the end of the queue.
        // At most `LOG_NOTIFICATIONS` lines are queued (a copy each); the rest only counted.
        let (queue, mut queued) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
        let lines = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let sending = {
            let peer = context.peer.clone();
            let inner = self.inner.clone();
            tokio::spawn(async move {
                while let Some(Some(line)) = queued.recv().await {
                    if inner.level.load(Ordering::Relaxed) > level_rank(LoggingLevel::Info) {
                        continue;
                    }
                    let message =
                        LoggingMessageNotificationParam::new(LoggingLevel::Info, line.into())
                            .with_logger("code-runtime");
                    if peer.notify_logging_message(message).await.is_err() {
                        break;
                    }
                }
            })
        };
        let sink = {
            let (queue, lines) = (queue.clone(), lines.clone());
            let denials = self.inner.approval.record.denials();
            let observe = self.inner.serving.metrics.observer();
            EventSink::new(move |event| {
                observe(&event);
                if let RunEvent::Log { line } = event {
                    if lines.fetch_add(1, Ordering::Relaxed) < LOG_NOTIFICATIONS {
                        let _ = queue.send(Some(line.to_owned()));
                    }
                }
                if let Some(denials) = &denials {
                    denials.deliver(event);
                }
            })
        };
        // The client's `notifications/cancelled` cancels `context.ct`: the run ends as `abort`.
        let setup = &self.inner.approval;
        let approvals = Approvals::new(ClientApprover::new(context.peer.clone(), setup.fallback));
        let request = CodeRunRequest {
            signal: Some(context.ct.child_token()),
            events: Some(sink),
            approvals: Some(setup.signing(approvals)),
            ..request
        };
        // The upstream calls of the run relay what their servers ask to this client.
        let result = Downstream::of(self.session, &context).serving(runtime.run(request)).await;
        let printed = lines.load(Ordering::Relaxed);
        if printed > LOG_NOTIFICATIONS {
            let more = printed - LOG_NOTIFICATIONS;
            let _ = queue.send(Some(format!(
                "… {more} more lines, not sent as notifications: the result holds every line"
            )));
        }
        let _ = queue.send(None);
        let _ = sending.await;
        result
    }

    fn runtime(&self, language: Option<&str>) -> Result<Arc<dyn CodeRuntime>, ErrorData> {
        let runtimes = &self.inner.runtimes;
        let chosen = match language {
            None => runtimes.first(),
            Some(language) => runtimes.iter().find(|(offered, _)| offered == language),
        };
        chosen.map(|(_, runtime)| runtime.clone()).ok_or_else(|| {
            let offered: Vec<&str> = runtimes.iter().map(|(offered, _)| offered.as_str()).collect();
            ErrorData::invalid_params(
                format!("run_code's language must be one of: {}", offered.join(", ")),
                None,
            )
        })
    }

    fn search_tools(
        &self,
        Parameters(SearchTools { query }): Parameters<SearchTools>,
    ) -> BoxFuture<'_, Result<CallToolResult, ErrorData>> {
        Box::pin(async move {
            let words = lookup::query_words(&query)?;
            let inner = self.inner.clone();
            lookup::off_the_executor(move || inner.index.search(&words)).await
        })
    }

    fn describe_tools(
        &self,
        Parameters(DescribeTools { names, language }): Parameters<DescribeTools>,
    ) -> BoxFuture<'_, Result<CallToolResult, ErrorData>> {
        Box::pin(async move {
            let language = language.unwrap_or_else(|| self.inner.runtimes[0].0.as_str().to_owned());
            let inner = self.inner.clone();
            lookup::off_the_executor(move || {
                let catalogue = &inner.catalogue;
                let base = CodeRunRequest {
                    values: catalogue.request(String::new()).values,
                    call_tool: catalogue.call_tool,
                    ..CodeRunRequest::default()
                };
                lookup::describe(&catalogue.namespaces, base, &names, &language)
            })
            .await?
        })
    }
}

/// A run's result as the tool's: its JSON as text and as `structuredContent`; an error when the
/// run failed (a paused run did not: its result carries the checkpoint `resume_run` takes).
fn tool_result(result: &CodeRunResult) -> CallToolResult {
    tool_text(result.to_json(), result.is_ok() || result.paused().is_some())
}

/// A result's JSON `text` as the tool's, a success or an error.
fn tool_text(text: String, success: bool) -> CallToolResult {
    // rmcp writes `structuredContent` with serde, one call per level: a value deeper than the
    // serde depth comes back as text only.
    let structured = json::parse(&text).ok().and_then(|value| value.to_serde_json().ok());
    let mut reply = if success {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    reply.structured_content = structured;
    reply
}

fn level_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
