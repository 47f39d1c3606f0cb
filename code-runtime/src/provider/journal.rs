//! The journal of a run that may pause or that resumes: every call the program makes, in call
//! order, with its answer, so a pause can write a [`Record`] and a resume can answer the
//! recorded calls again without calling the host ([`Journal`]).
//!
//! Replay is exact in what the program sees: the recorded answers come back in the order they
//! first came (their rank), each as soon as the program has made its call and every answer
//! ranked before it has come; a call other than the recorded one at its number ends the run.

use std::collections::{BTreeMap, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::approval::{ApprovalRule, Decision};
use crate::binding::{BindingError, CodeBindingNamespace};
use crate::checkpoint::{CallState, CheckpointError, Decisions, Record, RecordedCall, hex};
use crate::json::{self, JsonArray, JsonValue};
use crate::language::Language;
use crate::memory::{HostMemory, OverBudget};
use crate::program_text::unfenced;
use crate::provider::{Answer, BindingTable, CallId, Determinism, Recorded, catalogue};
use crate::request::CodeRunRequest;

/// What the host does with a call the program just made.
#[derive(Debug)]
pub(crate) enum Course {
    /// Run it: the call budgets, the input check and, for a marked function, the approver.
    Live,
    /// A call that waited for a decision when its run paused, decided on resume:
    /// [`Decision::Allow`] runs it (no approver asked again), [`Decision::Deny`] denies it.
    Decided(Decision),
    /// The record answers it; take the answers now due with [`Journal::due`]. `counted` when
    /// it counted against the call budgets.
    Replayed { counted: bool },
    /// The program made another call than the record holds at this number: the run ends as
    /// `exception` with this message.
    Diverged(String),
    /// The substrate says it answered a call from a record, and the run resumes none: it broke
    /// the protocol (a program that writes its own frames, say).
    Unrecorded,
}

/// The journal of one run.
pub(crate) struct Journal {
    record: Record,
    /// The index in `record.calls` of each call in flight, by its substrate id.
    by_id: HashMap<CallId, usize>,
    next_rank: u64,
    replay: Option<Replay>,
    memory: HostMemory,
}

/// The record a resumed run answers from.
struct Replay {
    calls: Vec<RecordedCall>,
    decisions: Decisions,
    /// The rank of the next recorded answer to give.
    next_rank: u64,
    /// Recorded answers whose calls the program has made, by rank, waiting for those ranked
    /// before them.
    ready: BTreeMap<u64, Due>,
}

/// A recorded answer to give the program now.
pub(crate) struct Due {
    pub(crate) id: CallId,
    pub(crate) outcome: Result<JsonValue, BindingError>,
    counted: bool,
    index: usize,
    pub(crate) at_ms: f64,
    /// The substrate gave it already ([`Event::Replayed`](crate::provider::Event::Replayed)).
    pub(crate) given: bool,
}

impl Journal {
    /// The journal a run keeps: one that resumes a record (with its decisions), or one that may
    /// pause (its approvals have a key); `None` for any other run.
    pub(crate) fn of_run(
        (language, program, namespaces, call_tool): (Language, &str, &[CodeBindingNamespace], bool),
        resumed: Option<(Record, Decisions)>,
        may_pause: bool,
        memory: &HostMemory,
    ) -> Result<Option<Self>, OverBudget> {
        match resumed {
            Some((record, decisions)) => {
                Self::resuming(record, decisions, memory.clone()).map(Some)
            }
            None if may_pause => {
                let bindings = fingerprint(language, namespaces, call_tool);
                Self::new(language.as_str(), program, bindings, memory.clone()).map(Some)
            }
            None => Ok(None),
        }
    }

    /// The journal of a fresh run of `program`.
    pub(crate) fn new(
        language: &str,
        program: &str,
        bindings: String,
        memory: HostMemory,
    ) -> Result<Self, OverBudget> {
        memory.keep(program.len())?;
        let record = Record {
            language: language.to_owned(),
            program: program.to_owned(),
            bindings,
            seed: fresh_seed(),
            started_ms: now_ms(),
            calls: Vec::new(),
            logs: Vec::new(),
            session: None,
        };
        Ok(Self { record, by_id: HashMap::new(), next_rank: 0, replay: None, memory })
    }

    /// The journal of a run that resumes `checkpoint`: same seed, same clock origin, its calls
    /// to answer again.
    pub(crate) fn resuming(
        checkpoint: Record,
        decisions: Decisions,
        memory: HostMemory,
    ) -> Result<Self, OverBudget> {
        memory.keep(checkpoint.program.len())?;
        let Record { language, program, bindings, seed, started_ms, calls, logs: _, session } =
            checkpoint;
        let record = Record {
            language,
            program,
            bindings,
            seed,
            started_ms,
            calls: Vec::new(),
            logs: vec![],
            session,
        };
        let replay = Replay { calls, decisions, next_rank: 0, ready: BTreeMap::new() };
        Ok(Self { record, by_id: HashMap::new(), next_rank: 0, replay: Some(replay), memory })
    }

    /// Records that the run is in session `name`, begun from the state of `digest`: a fresh run's
    /// checkpoint says so (a resumed run's record says so already).
    pub(crate) fn in_session(&mut self, name: &str, digest: String) {
        if self.replay.is_none() {
            self.record.session = Some((name.to_owned(), digest));
        }
    }

    /// Where the program's randomness and clock come from.
    pub(crate) fn determinism(&self) -> Determinism {
        Determinism { seed: self.record.seed, started_ms: self.record.started_ms }
    }

    /// The answers the substrate may give itself ([`Start::replay`](crate::provider::Start)):
    /// the record's settled calls, by call number.
    pub(crate) fn replay(&self, table: &BindingTable) -> Vec<Option<Recorded>> {
        let Some(replay) = &self.replay else { return Vec::new() };
        replay
            .calls
            .iter()
            .map(|call| match &call.state {
                CallState::Settled { outcome, rank, at_ms, .. } => {
                    let function = table.find(&call.namespace, &call.function)?;
                    let answer = Answer::new(outcome.clone(), Some(*at_ms));
                    Some(Recorded { function, answer, rank: *rank })
                }
                CallState::Pending | CallState::Dropped => None,
            })
            .collect()
    }

    /// Notes call `id` of `namespace.function` with `args`, and says what to do with it;
    /// `given` when the substrate answered it itself from the record.
    ///
    /// # Errors
    ///
    /// The run's host memory cannot hold the argument's copy.
    pub(crate) fn call(
        &mut self,
        (id, given): (CallId, bool),
        (namespace, function): (&str, &str),
        args: &JsonValue,
    ) -> Result<Course, OverBudget> {
        self.memory.keep(json::held_bytes(args))?;
        let index = self.record.calls.len();
        let number = index as u64 + 1;
        self.record.calls.push(RecordedCall {
            namespace: namespace.to_owned(),
            function: function.to_owned(),
            args: args.clone(),
            state: CallState::Dropped,
        });
        self.by_id.insert(id, index);
        let now = || describe(namespace, function, args);
        let Some(replay) = &mut self.replay else {
            return Ok(if given { Course::Unrecorded } else { Course::Live });
        };
        let Some(recorded) = replay.calls.get_mut(index) else {
            return Ok(given_unrecorded(given, number, now));
        };
        // Compared as JSON text: a number may come back an integer where it was a double.
        let same_args = || json::encode(&recorded.args) == json::encode(args);
        if recorded.namespace != namespace || recorded.function != function || !same_args() {
            let was = describe(&recorded.namespace, &recorded.function, &recorded.args);
            return Ok(Course::Diverged(catalogue::diverged(number, &was, &now())));
        }
        Ok(match std::mem::replace(&mut recorded.state, CallState::Dropped) {
            CallState::Settled { outcome, rank, at_ms, counted } => {
                replay.ready.insert(rank, Due { id, outcome, counted, index, at_ms, given });
                Course::Replayed { counted }
            }
            // The substrate answered a call the record does not answer: it took another path.
            _ if given => given_unrecorded(true, number, now),
            CallState::Pending => match replay.decisions.get(number) {
                Some(decision) => Course::Decided(decision.clone()),
                None => Course::Live,
            },
            CallState::Dropped => Course::Live,
        })
    }

    /// The recorded answers now due, in rank order; each is noted as answered.
    pub(crate) fn due(&mut self) -> Vec<Due> {
        let mut due = Vec::new();
        let Some(replay) = &mut self.replay else { return due };
        while let Some(answer) = replay.ready.remove(&replay.next_rank) {
            replay.next_rank += 1;
            due.push(answer);
        }
        for answer in &due {
            self.by_id.remove(&answer.id);
            let state = CallState::Settled {
                outcome: answer.outcome.clone(),
                rank: self.next_rank,
                at_ms: answer.at_ms,
                counted: answer.counted,
            };
            self.next_rank += 1;
            self.record.calls[answer.index].state = state;
        }
        due
    }

    /// Notes the answer to call `id`, made now (`counted` when the call counted against the
    /// budgets); the clock reading the program gets with it.
    ///
    /// # Errors
    ///
    /// The run's host memory cannot hold the answer's copy.
    pub(crate) fn settled(
        &mut self,
        id: CallId,
        outcome: &Result<JsonValue, BindingError>,
        counted: bool,
    ) -> Result<f64, OverBudget> {
        let at_ms = now_ms();
        let Some(index) = self.by_id.remove(&id) else { return Ok(at_ms) };
        let held = match outcome {
            Ok(value) => json::held_bytes(value),
            Err(error) => error.message().len() + error.data().map_or(0, json::held_bytes),
        };
        self.memory.keep(held)?;
        self.record.calls[index].state =
            CallState::Settled { outcome: outcome.clone(), rank: self.next_rank, at_ms, counted };
        self.next_rank += 1;
        Ok(at_ms)
    }

    /// Notes that call `id` waits for a decision, as the run pauses.
    pub(crate) fn pending(&mut self, id: CallId) {
        if let Some(index) = self.by_id.remove(&id) {
            self.record.calls[index].state = CallState::Pending;
        }
    }

    /// The record of the run so far, with the logs it printed; calls neither settled nor
    /// pending are dropped (a resume makes them again, live).
    pub(crate) fn into_record(mut self, logs: &[String]) -> Record {
        self.record.logs = logs.to_vec();
        self.record
    }
}

/// What the host does with call `number` that the record does not answer: runs it, unless the
/// substrate already answered it (a path the record does not have).
fn given_unrecorded(given: bool, number: u64, now: impl FnOnce() -> String) -> Course {
    if given {
        Course::Diverged(catalogue::diverged(number, "not answered", &now()))
    } else {
        Course::Live
    }
}

/// `ns.fn(args)` with the argument cut short, for the divergence message.
fn describe(namespace: &str, function: &str, args: &JsonValue) -> String {
    let args = json::encode(args);
    format!("{namespace}.{function}({})", json::truncate(&args, 200))
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |since| since.as_secs_f64() * 1e3)
}

/// A seed from the operating system's random source; the clock when it has none.
fn fresh_seed() -> u64 {
    let mut bytes = [0u8; 8];
    match getrandom::fill(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => now_ms().to_bits(),
    }
}

/// The record and decisions a request resumes, checked: the checkpoint verifies under the
/// request's key, and is of this language, of these bindings and (when the request names one) of
/// this program; every decision is on a pending call. `None` for a request that resumes nothing.
pub(crate) fn resumed(
    language: Language,
    request: &CodeRunRequest,
) -> Result<Option<(Record, Decisions)>, CheckpointError> {
    let Some(resume) = &request.resume else { return Ok(None) };
    let key = request.approvals.as_ref().and_then(|approvals| approvals.key.as_ref());
    let record = resume.checkpoint.open(key.ok_or(CheckpointError::NoKey)?)?;
    if record.language != language.as_str() {
        return Err(CheckpointError::OtherLanguage {
            checkpoint: record.language,
            runtime: language.as_str().to_owned(),
        });
    }
    if record.bindings != fingerprint(language, &request.bindings, request.call_tool) {
        return Err(CheckpointError::OtherBindings);
    }
    if !request.program.is_empty() {
        let program = unfenced(&request.program);
        if program.as_deref().unwrap_or(&request.program) != record.program {
            return Err(CheckpointError::OtherProgram);
        }
    }
    let pending = record.pending();
    if let Some(&id) =
        resume.decisions.by_call.keys().find(|id| !pending.iter().any(|call| call.id == **id))
    {
        return Err(CheckpointError::NotPending(id));
    }
    // A request that names a session resumes only a run of that session; one that names none
    // runs in the checkpoint's.
    let recorded = record.session.as_ref().map(|(name, _)| name.as_str());
    if let Some(named) = &request.session
        && recorded != Some(named.name())
    {
        let checkpoint = recorded.unwrap_or_default().to_owned();
        return Err(CheckpointError::OtherSession { checkpoint, request: named.name().to_owned() });
    }
    // Last, once everything else holds: a checkpoint refused for a mistake stays usable.
    let spent = request.approvals.as_ref().map(|approvals| &approvals.spent);
    let spent = spent.ok_or(CheckpointError::NoKey)?;
    match spent.spend(&resume.checkpoint.signature()) {
        Ok(true) => {}
        Ok(false) => return Err(CheckpointError::Resumed),
        Err(why) => return Err(CheckpointError::Unspendable(why)),
    }
    Ok(Some((record, resume.decisions.clone())))
}

/// A digest of what a program can see of its bindings and what decides its calls: each
/// namespace's global and error class, each function's name, input schema, whether it checks
/// it, and its approval rule; whether `call_tool` is there. Descriptions are left out: they
/// change what the model reads, not what a call does.
pub(crate) fn fingerprint(
    language: Language,
    namespaces: &[CodeBindingNamespace],
    call_tool: bool,
) -> String {
    let namespaces: JsonArray = namespaces
        .iter()
        .map(|namespace| {
            let functions: JsonArray = namespace
                .functions
                .iter()
                .map(|(name, function)| {
                    let approval = match function.approval_rule() {
                        None => JsonValue::Null,
                        Some(ApprovalRule::Always) => true.into(),
                        Some(ApprovalRule::When(schema)) => schema.clone(),
                    };
                    crate::json!({
                        "name": name,
                        "input": function.input_schema().cloned(),
                        "validates": function.validates_input(),
                        "approval": approval,
                    })
                })
                .collect();
            let class = namespace.error_class.as_ref().map(|class| {
                crate::json!([class.name.as_str(), class.member_name_property.as_str()])
            });
            crate::json!({
                "global": namespace.global,
                "errorClass": class,
                "globals": namespace.functions_as_globals,
                "functions": functions,
            })
        })
        .collect();
    let described = crate::json!({
        "language": language.as_str(),
        "callTool": call_tool,
        "namespaces": namespaces,
    });
    hex(&Sha256::digest(json::encode(&described).as_bytes()))
}
