//! A resumed run's recorded answers, given by the isolate itself ([`LocalReplay`]): a replayed
//! call costs no round trip to the host, which checks each one against the record as it learns
//! of it (`Event::Replayed`) and stops the run at the first that differs.

use std::collections::BTreeMap;

use code_runtime::provider::{Answer, CallId, FunctionId, Recorded};

/// The record's answers by call number, and the ones due, in rank order.
#[derive(Debug, Default)]
pub(crate) struct LocalReplay {
    recorded: Vec<Option<Recorded>>,
    /// Calls the program made so far (those the host learns of, numbered as it numbers them).
    made: usize,
    next_rank: u64,
    ready: BTreeMap<u64, (CallId, Answer)>,
}

impl LocalReplay {
    pub(crate) fn new(recorded: Vec<Option<Recorded>>) -> Self {
        Self { recorded, ..Self::default() }
    }

    /// The program made call `id` of `function`: `true` when the record answers it (the answer
    /// is then [`due`](LocalReplay::due) in its turn), `false` when the host does.
    pub(crate) fn call(&mut self, id: CallId, function: FunctionId) -> bool {
        let index = self.made;
        self.made += 1;
        match self.recorded.get_mut(index) {
            Some(slot) if slot.as_ref().is_some_and(|recorded| recorded.function == function) => {
                let Some(recorded) = slot.take() else { return false };
                self.ready.insert(recorded.rank, (id, recorded.answer));
                true
            }
            _ => false,
        }
    }

    /// The answers due now: each whose call was made and all ranked before it given, in order.
    pub(crate) fn due(&mut self) -> Vec<(CallId, Answer)> {
        let mut due = Vec::new();
        while let Some(answer) = self.ready.remove(&self.next_rank) {
            self.next_rank += 1;
            due.push(answer);
        }
        due
    }
}
