//! [`Switchboard`]: where each call the program makes goes: answered from a resumed run's
//! record, refused by the budgets, asked of the approver, or run; and where each answer goes
//! back, noted in the run's journal when the run may pause. It owns the run's calls and the
//! approvals they wait for: the host loop waits on [`Switchboard::poll_ready`] and hands what
//! comes to [`Switchboard::ready`], and every answer the program gets goes out through one
//! path (journal, report, substrate).

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::approval::Decision;
use crate::binding::{BindingArgs, BindingError};
use crate::checkpoint::{Checkpoint, CheckpointKey, Paused};
use crate::json::JsonValue;
use crate::limits::Limits;
use crate::provider::approvals::{self, Approving, Asked, Decider, Verdict};
use crate::provider::dispatch::{Calls, Settled};
use crate::provider::journal::{Course, Journal};
use crate::provider::report::RunReport;
use crate::provider::{
    Answer, BindingTable, CallId, Ending, FunctionId, StopReason, Substrate, catalogue,
};

/// What the host loop does after a call or an answer.
pub(crate) enum Turn {
    /// Go on.
    Continue,
    /// Stop the program: the run ends for this reason.
    Stop(StopReason),
    /// Stop the program: the run ends so.
    End(Ending),
    /// Stop the program: the run pauses.
    Pause,
}

/// What the switchboard has for the host loop ([`Switchboard::poll_ready`]).
pub(crate) enum Ready {
    /// A host function answered.
    Settled(Settled),
    /// The approver decided on a call.
    Decided(Verdict, Asked),
}

/// The calls of one run, the approvals they wait for, and the journal that records them.
pub(crate) struct Switchboard {
    calls: Calls,
    approving: Approving,
    journal: Option<Journal>,
    key: Option<CheckpointKey>,
    /// Calls the program made, numbered from 1.
    made: u64,
    max_memory_mb: u64,
    /// Why a host function ended the run as `output-limit`, in its words
    /// ([`BindingError::output_exceeded_because`]).
    output_reason: Option<String>,
}

impl Switchboard {
    pub(crate) fn new(
        calls: Calls,
        approving: Approving,
        journal: Option<Journal>,
        key: Option<CheckpointKey>,
        limits: &Limits,
    ) -> Self {
        let max_memory_mb = limits.max_memory_mb;
        Self { calls, approving, journal, key, made: 0, max_memory_mb, output_reason: None }
    }

    /// Why a host function ended the run as `output-limit`, if one did.
    pub(crate) fn take_output_reason(&mut self) -> Option<String> {
        self.output_reason.take()
    }

    /// The next answer of a host function or decision of the approver; `Pending` while there
    /// is none (also when nothing is in flight or waiting: the host loop waits on other things
    /// then).
    pub(crate) fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready> {
        if !self.calls.is_empty()
            && let Poll::Ready(Some(settled)) = self.calls.poll_settled(cx)
        {
            return Poll::Ready(Ready::Settled(settled));
        }
        if !self.approving.is_empty()
            && let Poll::Ready(Some((verdict, asked))) = self.approving.poll_answer(cx)
        {
            return Poll::Ready(Ready::Decided(verdict, asked));
        }
        Poll::Pending
    }

    /// Takes what [`poll_ready`](Self::poll_ready) gave.
    pub(crate) fn ready(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        ready: Ready,
    ) -> Turn {
        match ready {
            Ready::Settled(settled) => self.settled(substrate, report, settled),
            Ready::Decided(verdict, asked) => self.decided(substrate, report, verdict, asked),
        }
    }

    /// Whether a call waits for a decision (the run's wall clock stands still meanwhile).
    pub(crate) fn waits_for_decision(&self) -> bool {
        !self.approving.is_empty()
    }

    /// How many calls the approver was asked about.
    pub(crate) fn approvals_asked(&self) -> u64 {
        self.approving.asked()
    }

    /// The run's binding table.
    pub(crate) fn table(&self) -> Arc<BindingTable> {
        self.calls.table_handle()
    }

    fn over_memory(&self) -> Turn {
        Turn::Stop(StopReason::HostMemory { max_memory_mb: self.max_memory_mb })
    }

    /// The program called `function` with `args` as call `id`; `given` when the substrate
    /// answered it itself from the record ([`Event::Replayed`](crate::provider::Event)).
    pub(crate) fn call(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        (id, given): (CallId, bool),
        function: FunctionId,
        args: BindingArgs,
    ) -> Turn {
        let Some(names) = self.calls.table().names(function) else {
            // A substrate only names functions it was given; answer a stray id anyway.
            return self.stray(substrate, report, id, &format!("#{}", function.index()));
        };
        // The same numbering as the journal's: strays are not numbered.
        self.made += 1;
        report.call(id, names, &args);
        let course = match &mut self.journal {
            None if given => Course::Unrecorded,
            None => Course::Live,
            Some(journal) => match journal.call((id, given), names, &args) {
                Ok(course) => course,
                Err(_) => return self.over_memory(),
            },
        };
        match course {
            Course::Diverged(message) => Turn::End(Ending::Threw(message)),
            // Only a resumed run's substrate answers calls itself.
            Course::Unrecorded => Turn::End(Ending::Failed(
                "protocol violation: a call answered from a record, in a run that resumes none"
                    .to_owned(),
            )),
            Course::Replayed { counted } => {
                if counted {
                    self.calls.count(function);
                }
                self.deliver_due(substrate, report);
                Turn::Continue
            }
            Course::Decided(decision) => {
                // Asked before the pause; the audit shows the question with its answer.
                let asked = approvals::request(names, self.made, &args, self.calls.run());
                if let Err(rejection) = self.calls.admit(function, &args) {
                    return self.answer(substrate, report, id, Err(rejection), false);
                }
                report.approval_requested(id, &asked);
                let verdict = Verdict { id, decision, by: Decider::Resume };
                self.decided(
                    substrate,
                    report,
                    verdict,
                    Asked { number: self.made, function, args },
                )
            }
            Course::Live => self.live(substrate, report, id, function, args),
        }
    }

    /// A call the record does not answer: the budgets, then the approver or the host function.
    fn live(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        id: CallId,
        function: FunctionId,
        args: BindingArgs,
    ) -> Turn {
        if let Err(rejection) = self.calls.admit(function, &args) {
            return self.answer(substrate, report, id, Err(rejection), false);
        }
        let table = self.calls.table_handle();
        match table.names(function) {
            Some(names) if table.needs_approval(function, &args) => {
                let asked = Asked { number: self.made, function, args };
                match self.approving.ask(id, names, asked, self.calls.run()) {
                    Ok(request) => report.approval_requested(id, &request),
                    Err(_) => return self.over_memory(),
                }
            }
            _ => self.calls.begin(id, function, args),
        }
        Turn::Continue
    }

    /// A call of a function the request lacks ([`Event::Stray`](crate::provider::Event)), or
    /// of an id the table lacks.
    pub(crate) fn stray(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        id: CallId,
        label: &str,
    ) -> Turn {
        let rejected = Err(self.calls.refuse_stray(label));
        self.answer(substrate, report, id, rejected, false)
    }

    /// A host function answered.
    fn settled(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        settled: Settled,
    ) -> Turn {
        if let Err(error) = &settled.outcome
            && error.is_output_exceeded()
        {
            self.output_reason = Some(error.message().to_owned());
            return Turn::Stop(StopReason::OutputExceeded);
        }
        let Settled { id, outcome, duration } = settled;
        self.deliver(substrate, report, id, outcome, (true, duration))
    }

    /// A decision on a call: the approver's, or one a resume brought.
    fn decided(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        Verdict { id, decision, by }: Verdict,
        asked: Asked,
    ) -> Turn {
        report.decided(id, &decision, &by);
        match decision {
            Decision::Allow => {
                let mut args = asked.args;
                args.approve(by.as_str());
                self.calls.begin(id, asked.function, args);
                Turn::Continue
            }
            Decision::Deny(reason) => {
                let denied = BindingError::new(catalogue::denied(&reason));
                self.answer(substrate, report, id, Err(denied), true)
            }
            Decision::Pause => {
                if let Some(journal) = &mut self.journal {
                    journal.pending(id);
                }
                Turn::Pause
            }
        }
    }

    /// Answers call `id` now, without a host function.
    fn answer(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        id: CallId,
        outcome: Result<JsonValue, BindingError>,
        counted: bool,
    ) -> Turn {
        self.deliver(substrate, report, id, outcome, (counted, Duration::ZERO))
    }

    /// The one way an answer reaches the program: noted ([`note`](Self::note)), then handed
    /// to the substrate with the run's clock at that moment.
    fn deliver(
        &mut self,
        substrate: &mut impl Substrate,
        report: &mut RunReport,
        id: CallId,
        outcome: Result<JsonValue, BindingError>,
        (counted, duration): (bool, Duration),
    ) -> Turn {
        match self.note(report, id, &outcome, (counted, duration)) {
            Ok(clock_ms) => {
                substrate.settle(id, Answer::new(outcome, clock_ms));
                Turn::Continue
            }
            Err(turn) => turn,
        }
    }

    /// Notes an answer to call `id`: in the journal (when the run may pause; `counted` when
    /// the call counted against the budgets), then in the report. `Ok` with the run's clock
    /// the journal gave it; `Err` ends the run when the journal is over the memory budget.
    fn note(
        &mut self,
        report: &mut RunReport,
        id: CallId,
        outcome: &Result<JsonValue, BindingError>,
        (counted, duration): (bool, Duration),
    ) -> Result<Option<f64>, Turn> {
        let clock_ms = match &mut self.journal {
            None => None,
            Some(journal) => match journal.settled(id, outcome, counted) {
                Ok(at_ms) => Some(at_ms),
                Err(_) => return Err(self.over_memory()),
            },
        };
        report.settled(id, outcome, duration);
        Ok(clock_ms)
    }

    /// Gives the program the recorded answers now due, in their first order.
    fn deliver_due(&mut self, substrate: &mut impl Substrate, report: &mut RunReport) {
        let Some(journal) = &mut self.journal else { return };
        for due in journal.due() {
            report.settled(due.id, &due.outcome, Duration::ZERO);
            if !due.given {
                substrate.settle(due.id, Answer::new(due.outcome, Some(due.at_ms)));
            }
        }
    }

    /// The program is stopped and the run pauses: the calls waiting for a decision are pending,
    /// those waiting for a place in flight never started, and those in flight are waited for
    /// (until `stop` completes) so their answers are recorded and a resume does not make them
    /// again.
    pub(crate) async fn drain(&mut self, report: &mut RunReport, stop: impl Future<Output = ()>) {
        for (id, _) in self.approving.take_waiting() {
            if let Some(journal) = &mut self.journal {
                journal.pending(id);
            }
        }
        self.calls.forget_waiting();
        let mut stop = std::pin::pin!(stop);
        while !self.calls.is_empty() {
            let settled = tokio::select! {
                biased;
                () = stop.as_mut() => break,
                settled = std::future::poll_fn(|cx| self.calls.poll_settled(cx)) => settled,
            };
            let Some(settled) = settled else { break };
            // Over the memory budget the record misses the answer, and the resume makes the
            // call again: the run pauses either way.
            let _ = self.note(report, settled.id, &settled.outcome, (true, settled.duration));
        }
    }

    /// The paused run's ending: its record, with `logs`, signed.
    pub(crate) fn paused(self, logs: &[String]) -> Ending {
        let (Some(journal), Some(key)) = (self.journal, self.key) else {
            return Ending::Failed("a run without a checkpoint key paused".to_owned());
        };
        let record = journal.into_record(logs);
        let pending = record.pending();
        let checkpoint = Checkpoint::sign(&record, &key);
        Ending::Paused(Box::new(Paused { checkpoint, pending }))
    }

    /// Calls admitted so far.
    pub(crate) fn made(&self) -> u64 {
        self.calls.made()
    }
}
