//! Binding dispatch: the request's functions as one table ([`BindingTable`]), and the calls in
//! flight of one run ([`Calls`]), each checked once when it settles.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tracing::Instrument;

use crate::binding::{BindingArgs, BindingError, BindingFunction, CodeBindingNamespace};
use crate::input_schema::{InputSchema, Mismatch};
use crate::json::{self, JsonValue};
use crate::limits::{Budget, Limits};
use crate::provider::{catalogue, reactor};

/// A substrate's name for one call, unique within its run; the host answers it once.
pub type CallId = u64;

/// A function of the request, by position: namespaces in request order, then functions in
/// declaration order. Substrates install members in this order, so position `n` is the `n`th
/// member they created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FunctionId(u32);

impl FunctionId {
    /// The id at position `index`: what a substrate reads back from its own wire. The host looks
    /// every id up in the run's [`BindingTable`], so one the request lacks is refused there.
    pub const fn new(index: u32) -> Self {
        Self(index)
    }

    /// Its position.
    pub const fn index(self) -> u32 {
        self.0
    }

    /// Every function of `namespaces` with its id, in id order: the one numbering the table,
    /// the globals' plan and every substrate use.
    pub fn enumerate(
        namespaces: &[CodeBindingNamespace],
    ) -> impl Iterator<Item = (FunctionId, &CodeBindingNamespace, &str)> + '_ {
        namespaces
            .iter()
            .flat_map(|namespace| namespace.functions.keys().map(move |name| (namespace, name)))
            .zip(0u32..)
            .map(|((namespace, name), id)| (FunctionId(id), namespace, name.as_str()))
    }
}

/// The request's functions, flattened in [`FunctionId`] order, each with its `global.name` label.
#[derive(Debug)]
pub struct BindingTable {
    functions: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    global: String,
    name: String,
    label: String,
    function: BindingFunction,
    /// The compiled input schema, when the function validates its input.
    input: Option<Arc<InputSchema>>,
    /// Which of its calls need approval.
    approval: Approval,
}

/// Which calls of a function need the host's approval.
#[derive(Debug)]
enum Approval {
    Never,
    Always,
    /// Those whose argument matches the schema.
    When(Arc<InputSchema>),
}

impl BindingTable {
    /// The table of `namespaces`. A function whose input schema does not compile is not checked;
    /// [`validate_bindings`](crate::provider::validate_bindings) refuses such a request first.
    pub fn new(namespaces: &[CodeBindingNamespace]) -> Self {
        let functions = FunctionId::enumerate(namespaces)
            .filter_map(|(_, namespace, name)| {
                let function = namespace.functions.get(name)?;
                Some(Entry {
                    global: namespace.global.clone(),
                    name: name.to_owned(),
                    label: format!("{}.{name}", namespace.global),
                    function: function.clone(),
                    input: function.input_check().ok().flatten(),
                    approval: match (function.approval_rule(), function.approval_check()) {
                        (None, _) => Approval::Never,
                        (Some(_), Ok(Some(schema))) => Approval::When(schema),
                        // A schema that does not compile is refused before a run; were it
                        // not, every call would be asked about.
                        (Some(_), _) => Approval::Always,
                    },
                })
            })
            .collect();
        Self { functions }
    }

    /// The function `name` of the namespace `global`, matched exactly.
    pub fn find(&self, global: &str, name: &str) -> Option<FunctionId> {
        let index =
            self.functions.iter().position(|entry| entry.global == global && entry.name == name)?;
        u32::try_from(index).ok().map(FunctionId::new)
    }

    /// `global.name` of a function, as messages name it.
    pub fn label(&self, id: FunctionId) -> Option<&str> {
        self.entry(id).map(|entry| entry.label.as_str())
    }

    /// The namespace's `global` and the function's name.
    pub fn names(&self, id: FunctionId) -> Option<(&str, &str)> {
        self.entry(id).map(|entry| (entry.global.as_str(), entry.name.as_str()))
    }

    /// Whether this call of `id` with `args` needs the host's approval: always, or when the
    /// argument matches the function's schema. Only a definite mismatch spares a call the
    /// question: an argument too deep to check, a check that gave up, and an id the table lacks
    /// all need approval (the decision fails closed).
    pub fn needs_approval(&self, id: FunctionId, args: &JsonValue) -> bool {
        match self.entry(id).map(|entry| &entry.approval) {
            Some(Approval::Never) => false,
            None | Some(Approval::Always) => true,
            Some(Approval::When(schema)) => match schema.check(args) {
                Err(Mismatch::Value { .. }) => false,
                Ok(()) | Err(Mismatch::TooDeep { .. } | Mismatch::Undecided { .. }) => true,
            },
        }
    }

    /// How many functions there are.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    fn entry(&self, id: FunctionId) -> Option<&Entry> {
        self.functions.get(usize::try_from(id.0).ok()?)
    }
}

/// A call that was answered: its id, the (checked) answer, and how long it took.
pub(crate) struct Settled {
    pub(crate) id: CallId,
    pub(crate) outcome: Result<JsonValue, BindingError>,
    pub(crate) duration: Duration,
}

/// The binding calls in flight of one run, the calls waiting for a place among them, and the
/// run's call budgets. Dropping it cancels the calls (drops their futures and the waiting ones).
pub(crate) struct Calls {
    table: Arc<BindingTable>,
    in_flight: FuturesUnordered<Pin<Box<dyn Future<Output = Settled> + Send>>>,
    /// Calls admitted while `max_pending_calls` were in flight, in call order: each starts when
    /// one in flight settles. Their arguments hold their charge of the run's host memory.
    waiting: VecDeque<(CallId, FunctionId, BindingArgs)>,
    budget: CallBudget,
    /// Calls admitted so far, in all and per function.
    made: u64,
    made_per_function: Vec<u64>,
    /// The span every call's span is a child of.
    run_span: tracing::Span,
    /// The run's number in this process, which every call's arguments carry
    /// ([`BindingArgs::run`]).
    run: u64,
}

/// The call budgets of one run, from its [`Limits`].
#[derive(Clone, Copy)]
struct CallBudget {
    calls: u64,
    per_function: u64,
    pending: u64,
}

impl Calls {
    pub(crate) fn new(table: Arc<BindingTable>, limits: &Limits, run_span: tracing::Span) -> Self {
        let functions = table.len();
        Self {
            table,
            in_flight: FuturesUnordered::new(),
            waiting: VecDeque::new(),
            budget: CallBudget {
                calls: limits.max_calls,
                per_function: limits.max_calls_per_function,
                pending: limits.max_pending_calls,
            },
            made: 0,
            made_per_function: vec![0; functions],
            run_span,
            run: {
                static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    pub(crate) fn table(&self) -> &BindingTable {
        &self.table
    }

    /// The table, to keep once the calls are gone.
    pub(crate) fn table_handle(&self) -> Arc<BindingTable> {
        self.table.clone()
    }

    /// Calls admitted so far (budget rejections are not calls the host saw).
    pub(crate) fn made(&self) -> u64 {
        self.made
    }

    /// Admits a call of `function` with `args`: the run's budgets and the function's input
    /// schema decide, and an admitted call counts against the budgets. `Err` holds the
    /// rejection the program gets; no host closure ran. A function the table does not have is
    /// answered as a stray.
    pub(crate) fn admit(
        &mut self,
        function: FunctionId,
        args: &JsonValue,
    ) -> Result<(), BindingError> {
        let Some(entry) = self.table.entry(function) else {
            // A substrate only names functions it was given; answer a stray id anyway.
            return Err(self.refuse_stray(&format!("#{}", function.0)));
        };
        let index = function.0 as usize;
        self.admit_budget(&entry.label, index)?;
        if let Some(input) = &entry.input {
            input.check(args).map_err(|mismatch| refusal(&entry.label, mismatch))?;
        }
        self.count(function);
        Ok(())
    }

    /// Counts a call of `function` against the budgets without checking them: a call a resumed
    /// run answers from its record, which the budgets admitted then.
    pub(crate) fn count(&mut self, function: FunctionId) {
        self.made += 1;
        if let Some(made) = self.made_per_function.get_mut(function.0 as usize) {
            *made += 1;
        }
    }

    /// Starts an admitted call: the host closure runs now, inside the call's span, and its
    /// future is polled with the others; or, while `max_pending_calls` are in flight, it waits
    /// its turn in call order.
    pub(crate) fn begin(&mut self, id: CallId, function: FunctionId, args: BindingArgs) {
        if self.in_flight.len() as u64 >= self.budget.pending {
            self.waiting.push_back((id, function, args));
        } else {
            self.launch(id, function, args);
        }
    }

    /// The run's number in this process ([`BindingArgs::run`]).
    pub(crate) fn run(&self) -> u64 {
        self.run
    }

    /// Forgets the calls waiting for a place in flight (they never started), as the run pauses;
    /// the calls in flight go on.
    pub(crate) fn forget_waiting(&mut self) {
        self.waiting.clear();
    }

    /// Runs the closure of an admitted call.
    fn launch(&mut self, id: CallId, function: FunctionId, mut args: BindingArgs) {
        args.in_run(self.run);
        let table = self.table.clone();
        let Some(entry) = self.table.entry(function) else { return };
        let span = tracing::info_span!(
            parent: &self.run_span,
            "code_runtime.call",
            namespace = %entry.global,
            function = %entry.name,
            approved_by = tracing::field::Empty,
            ok = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        if let Some(by) = args.approved_by() {
            span.record("approved_by", by);
        }
        let started = Instant::now();
        // The closure's synchronous part runs here and may panic as well as its future.
        let call = span
            .in_scope(|| std::panic::catch_unwind(AssertUnwindSafe(|| entry.function.call(args))));
        let in_span = span.clone();
        let call = async move {
            let outcome = match call {
                Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
                Err(panic) => Err(panic),
            };
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(panic) => Err(panicked(&table, function, &*panic)),
            };
            let outcome = checked(&table, function, outcome);
            let duration = started.elapsed();
            span.record("ok", outcome.is_ok());
            span.record("duration_ms", duration.as_secs_f64() * 1e3);
            Settled { id, outcome, duration }
        };
        self.in_flight.push(Box::pin(reactor::in_some_runtime(call.instrument(in_span))));
    }

    /// Answers a call of a function the request does not have ([`Event::Stray`]): it counts
    /// against the budget of calls in all, like any call, so a flood of them meets it; over the
    /// budget, the budget's rejection.
    ///
    /// [`Event::Stray`]: crate::provider::Event::Stray
    pub(crate) fn refuse_stray(&mut self, label: &str) -> BindingError {
        if self.made >= self.budget.calls {
            let limit = self.budget.calls;
            return BindingError::new(catalogue::calls_exhausted(label, limit))
                .with_data(crate::json!({ "budget": Budget::Calls.key(), "limit": limit }));
        }
        self.made += 1;
        BindingError::new(catalogue::unknown_binding(label))
    }

    /// Whether the budgets admit one more call of the function at `index`; the catalogued
    /// rejection when they do not.
    fn admit_budget(&self, label: &str, index: usize) -> Result<(), BindingError> {
        let refused = |budget: Budget, limit: u64, message: String| {
            Err(BindingError::new(message)
                .with_data(crate::json!({ "budget": budget.key(), "limit": limit })))
        };
        if self.made >= self.budget.calls {
            return refused(
                Budget::Calls,
                self.budget.calls,
                catalogue::calls_exhausted(label, self.budget.calls),
            );
        }
        if self.made_per_function[index] >= self.budget.per_function {
            let limit = self.budget.per_function;
            return refused(
                Budget::CallsPerFunction,
                limit,
                catalogue::function_calls_exhausted(label, limit),
            );
        }
        Ok(())
    }

    /// The next call to settle, checked (see [`checked`]). Its place in flight goes to the call
    /// that has waited longest.
    pub(crate) fn poll_settled(&mut self, cx: &mut Context<'_>) -> Poll<Option<Settled>> {
        let settled = std::task::ready!(self.in_flight.poll_next_unpin(cx));
        while (self.in_flight.len() as u64) < self.budget.pending {
            let Some((id, function, args)) = self.waiting.pop_front() else { break };
            self.launch(id, function, args);
        }
        Poll::Ready(settled)
    }
}

/// The rejection of a call whose argument does not match its input schema.
fn refusal(label: &str, mismatch: Mismatch) -> BindingError {
    match mismatch {
        Mismatch::TooDeep { limit } => {
            BindingError::new(catalogue::argument_too_deep(label, limit))
                .with_data(crate::json!({ "path": "", "schemaPath": "" }))
        }
        Mismatch::Value { path, schema_path, detail } => {
            BindingError::new(catalogue::argument_mismatch(label, &path, &detail))
                .with_data(crate::json!({ "path": path, "schemaPath": schema_path }))
        }
        Mismatch::Undecided { path, schema_path, detail } => {
            BindingError::new(catalogue::argument_undecided(label, &path, &detail))
                .with_data(crate::json!({ "path": path, "schemaPath": schema_path }))
        }
    }
}

/// A settled call as the program may see it: a resolution must be lossless JSON, a rejection's
/// data too. What is not becomes a rejection naming the binding (or data-less), and the host hears
/// of it through `tracing`.
fn checked(
    table: &BindingTable,
    function: FunctionId,
    outcome: Result<JsonValue, BindingError>,
) -> Result<JsonValue, BindingError> {
    let label = table.label(function).unwrap_or_default();
    match outcome {
        Ok(value) => match json::validate(&value) {
            Ok(()) => Ok(value),
            Err(why) => {
                tracing::warn!(binding = label, %why, "binding resolved with a value that is not lossless JSON");
                Err(BindingError::new(catalogue::lossy_resolution(label, &why.to_string())))
            }
        },
        Err(mut error) => {
            if let Some(data) = error.take_data() {
                match json::validate(&data) {
                    Ok(()) => error = error.with_data(data),
                    Err(why) => {
                        tracing::warn!(binding = label, %why, "binding rejected with data that is not lossless JSON; the program sees no data");
                    }
                }
            }
            Err(error)
        }
    }
}

fn panicked(
    table: &BindingTable,
    function: FunctionId,
    payload: &(dyn std::any::Any + Send),
) -> BindingError {
    let label = table.label(function).unwrap_or_default();
    let detail = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string payload");
    tracing::error!(binding = label, panic = detail, "binding panicked");
    BindingError::new(catalogue::panicked(label))
}
