//! The approvals of one run, host side ([`Approving`]): the calls that wait for a decision, and
//! the approver's answers as they come, each within the request's timeout.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};

use crate::approval::{ApprovalRequest, Decision};
use crate::binding::BindingArgs;
use crate::json::{self, JsonValue};
use crate::memory::{HostMemory, OverBudget};
use crate::provider::{CallId, FunctionId, catalogue, reactor};
use crate::request::Approvals;

/// A call waiting for its decision.
pub(crate) struct Asked {
    /// Its number in the run.
    pub(crate) number: u64,
    pub(crate) function: FunctionId,
    pub(crate) args: BindingArgs,
}

/// A decision on the call `id`, and who made it.
pub(crate) struct Verdict {
    pub(crate) id: CallId,
    pub(crate) decision: Decision,
    pub(crate) by: Decider,
}

/// Who decided on a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decider {
    /// The request's approver, by its [`name`](crate::Approver::name).
    Approver(String),
    /// The resume that brought the decision.
    Resume,
    /// No one, in time: the approvals' timeout denied it.
    Timeout,
    /// No one: the request has no approver, which denies.
    NoApprover,
}

impl Decider {
    /// How events, records and a granted argument name it: the approver's name, `"resume"`,
    /// `"timeout"`, `"none"`.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Decider::Approver(name) => name,
            Decider::Resume => "resume",
            Decider::Timeout => "timeout",
            Decider::NoApprover => "none",
        }
    }
}

/// The calls of one run that wait for a decision, and the decisions on their way.
pub(crate) struct Approving {
    approvals: Option<Approvals>,
    /// The run's host memory, which holds the approver's copy of each argument too.
    memory: HostMemory,
    waiting: HashMap<CallId, Asked>,
    answers: FuturesUnordered<BoxFuture<'static, Verdict>>,
    /// How many calls were asked about, for the run's span.
    asked: u64,
}

impl Approving {
    pub(crate) fn new(approvals: Option<Approvals>, memory: HostMemory) -> Self {
        Self {
            approvals,
            memory,
            waiting: HashMap::new(),
            answers: FuturesUnordered::new(),
            asked: 0,
        }
    }

    /// Whether no call waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// How many calls were asked about so far.
    pub(crate) fn asked(&self) -> u64 {
        self.asked
    }

    /// Asks about call `id` of `namespace.function`, the program's `number`th: the answer comes
    /// from [`poll_answer`](Approving::poll_answer). Without an approver it comes at once, a
    /// denial (`no approver`).
    ///
    /// # Errors
    ///
    /// The run's host memory cannot hold the approver's copy of the argument.
    pub(crate) fn ask(
        &mut self,
        id: CallId,
        (namespace, function_name): (&str, &str),
        asked: Asked,
        run: u64,
    ) -> Result<ApprovalRequest, OverBudget> {
        let request = request((namespace, function_name), asked.number, &asked.args, run);
        // The approver's copy of the argument and the line that shows it to a person.
        let held = self.memory.hold(json::held_bytes(&asked.args) + request.summary.len())?;
        self.asked += 1;
        self.waiting.insert(id, asked);
        let Some(approvals) = &self.approvals else {
            let answer = Verdict {
                id,
                decision: Decision::deny(catalogue::NO_APPROVER),
                by: Decider::NoApprover,
            };
            self.answers.push(Box::pin(std::future::ready(answer)));
            return Ok(request);
        };
        let approver = approvals.approver.clone();
        let can_pause = approvals.can_pause();
        // The timer is the reactor's, whatever executor polls the run.
        let deadline = reactor::enter(|| tokio::time::sleep(approvals.timeout));
        let asking = request.clone();
        let answer = async move {
            let _held = held;
            let name = approver.name().to_owned();
            // The approver is the host's code: a panic in it denies the call, as a panic in a
            // binding rejects it, and the host hears of it.
            let decide = AssertUnwindSafe(approver.decide(&asking)).catch_unwind();
            tokio::select! {
                decision = reactor::in_some_runtime(decide) => {
                    let decision = match decision {
                        Ok(Decision::Pause) if !can_pause => Decision::deny(catalogue::CANNOT_PAUSE),
                        Ok(decision) => decision,
                        Err(_) => {
                            tracing::error!(approver = %name, call = asking.call, "approver panicked");
                            Decision::deny(catalogue::APPROVER_FAILED)
                        }
                    };
                    Verdict { id, decision, by: Decider::Approver(name) }
                }
                () = deadline => {
                    Verdict { id, decision: Decision::deny(catalogue::NO_DECISION), by: Decider::Timeout }
                }
            }
        };
        self.answers.push(answer.boxed());
        Ok(request)
    }

    /// The next decision, with the call it decides.
    pub(crate) fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<Option<(Verdict, Asked)>> {
        loop {
            let Some(answer) = std::task::ready!(self.answers.poll_next_unpin(cx)) else {
                return Poll::Ready(None);
            };
            if let Some(asked) = self.waiting.remove(&answer.id) {
                return Poll::Ready(Some((answer, asked)));
            }
        }
    }

    /// The calls still waiting, as the run pauses; their approvers' futures are dropped.
    pub(crate) fn take_waiting(&mut self) -> Vec<(CallId, Asked)> {
        self.answers.clear();
        let mut waiting: Vec<_> = self.waiting.drain().collect();
        waiting.sort_by_key(|(_, asked)| asked.number);
        waiting
    }
}

/// What an approver is asked about call `number` of `namespace.function` with `args`, of `run`.
pub(crate) fn request(
    (namespace, function): (&str, &str),
    number: u64,
    args: &JsonValue,
    run: u64,
) -> ApprovalRequest {
    ApprovalRequest {
        namespace: namespace.to_owned(),
        function: function.to_owned(),
        args: args.clone(),
        summary: crate::approval::summarize(namespace, function, args),
        call: number,
        run,
    }
}
