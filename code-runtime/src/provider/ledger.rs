//! The output ledger: the one combined budget over what a run may hand back (docs/reference.md §3.10).
//!
//! What is counted is `bytes(JSON(logs)) + bytes(JSON(value))` for a success, or
//! `bytes(JSON(logs)) + bytes(JSON(error.message))` for a failure, in compact JSON with ECMAScript
//! number spelling. The result envelope (field names, braces, the kind) is free. The ledger starts
//! at 2 bytes for the empty log array `[]`; each admitted entry costs its JSON string size plus one
//! comma after the first.
//!
//! Both providers keep exactly one ledger per run (the host loop does) and every result is built
//! through [`OutputLedger::settle`], so the two languages fail the same way at the same byte.
//! [`CodeRunResult`] has no other public constructor.

use crate::json;
use crate::provider::{Ending, StopReason};
use crate::result::{CodeRunFailure, CodeRunResult};

/// The output budget of one run, and the logs admitted against it so far.
///
/// Created when a run starts, fed every log entry in emission order, and consumed by
/// [`settle`](OutputLedger::settle) when the run ends. Admission is O(length of the entry) and
/// allocates nothing beyond storing the entry.
#[derive(Debug)]
pub struct OutputLedger {
    max: usize,
    used: usize,
    logs: Vec<String>,
    standing: Standing,
}

/// Whether a ledger's budget still holds, and if not, what exceeded it.
#[derive(Debug)]
enum Standing {
    Holds,
    /// Exceeded by a log entry, kept aside: its prefix may appear in the limit result.
    ExceededBy(String),
    /// Exceeded as the substrate or the host loop saw it, with no entry to keep.
    Exceeded,
    /// A budget of the host's other than this one was exceeded (a record file's bound, say):
    /// the limit result says so in these words.
    ExceededBecause(String),
}

/// What became of a log entry offered to [`OutputLedger::admit_log`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "an exceeded ledger means the run must end now"]
pub enum Admission {
    /// The entry fits and is kept.
    Admitted,
    /// The budget is exceeded (by this entry or earlier): the provider should stop the program and
    /// [`settle`](OutputLedger::settle), which yields the `output-limit` result.
    Exceeded,
}

impl OutputLedger {
    /// The smallest budget a provider may be configured with: `[]` plus the quotes of an empty
    /// diagnostic.
    pub const MIN_MAX_OUTPUT_BYTES: usize = crate::Limits::MIN_OUTPUT_BYTES as usize;

    /// An empty ledger with a budget of `max_output_bytes`.
    ///
    /// Any budget works; providers validate theirs against [`Self::MIN_MAX_OUTPUT_BYTES`] at
    /// construction (see [`Limits`](crate::Limits)).
    pub fn new(max_output_bytes: usize) -> Self {
        Self { max: max_output_bytes, used: 2, logs: Vec::new(), standing: Standing::Holds }
    }

    /// The budget.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes used so far (2 for an empty log array).
    pub fn used(&self) -> usize {
        self.used
    }

    /// Bytes still free for logs and the final value or diagnostic.
    pub fn remaining(&self) -> usize {
        self.max.saturating_sub(self.used)
    }

    /// The entries admitted so far, in order.
    pub fn logs(&self) -> &[String] {
        &self.logs
    }

    /// Whether the budget has been exceeded; every later entry is dropped.
    pub fn is_exceeded(&self) -> bool {
        !matches!(self.standing, Standing::Holds)
    }

    /// Offers one log entry, in emission order.
    ///
    /// An entry that does not fit exceeds the budget: it is kept aside (its prefix may appear in the
    /// `output-limit` result) and every later entry is dropped.
    pub fn admit_log(&mut self, entry: String) -> Admission {
        if self.is_exceeded() {
            return Admission::Exceeded;
        }
        let separator = usize::from(!self.logs.is_empty());
        let cost = json::string_len(&entry) + separator;
        if cost <= self.remaining() {
            self.used += cost;
            self.logs.push(entry);
            Admission::Admitted
        } else {
            self.standing = Standing::ExceededBy(entry);
            Admission::Exceeded
        }
    }

    /// Records that the substrate itself detected an overflow (for instance a worker-side buffer
    /// that refused an entry before it reached the host). Later entries are dropped.
    pub fn exceed(&mut self) {
        self.exceed_with(Standing::Exceeded);
    }

    /// [`exceed`](OutputLedger::exceed) for a budget of the host's other than the run's output
    /// (a record file that reached its bound, say): the `output-limit` result's message is
    /// `reason`, not `outer output exceeded <max> bytes`. An entry that exceeded the budget
    /// first keeps its place.
    pub fn exceed_because(&mut self, reason: String) {
        self.exceed_with(Standing::ExceededBecause(reason));
    }

    fn exceed_with(&mut self, standing: Standing) {
        if !self.is_exceeded() {
            self.standing = standing;
        }
    }

    /// Builds the run's result from how it ended, applying the budget.
    ///
    /// - an exceeded ledger, or [`StopReason::OutputExceeded`], yields the `output-limit` result
    ///   whatever the ending;
    /// - a completion value must be lossless JSON (else `invalid-output`) and fit the remaining
    ///   budget;
    /// - a failure's message must fit the remaining budget as a JSON string.
    ///
    /// Whatever does not fit becomes the *limit result*: `output-limit` with the logs re-trimmed to
    /// leave room for `outer output exceeded <max> bytes` (only a prefix of it when the budget is
    /// below the message's length plus the 4 bytes of `[]` and its quotes). The kind of the
    /// original failure is not kept (docs/reference.md C073).
    pub fn settle(mut self, ending: Ending) -> CodeRunResult {
        if matches!(ending, Ending::Stopped(StopReason::OutputExceeded)) {
            self.exceed();
        }
        let Self { max, used, logs, standing } = self;
        match standing {
            Standing::Holds => {}
            Standing::ExceededBy(entry) => return limit_result(max, logs, Some(entry)),
            Standing::Exceeded => return limit_result(max, logs, None),
            Standing::ExceededBecause(reason) => {
                let failure = CodeRunFailure::output_limit(max).with_message(reason);
                return failure_result(max, logs, None, failure);
            }
        }
        let room = max.saturating_sub(used);
        if let Ending::Paused(paused) = ending {
            return CodeRunResult::paused_with(logs, *paused);
        }
        match ending.into_failure() {
            Ok(None) => CodeRunResult::completed(logs, None),
            Ok(Some(value)) => {
                if json::validate(&value).is_err() {
                    return failure_within(max, room, logs, CodeRunFailure::invalid_output());
                }
                if json::encoded_len(&value, room).is_some() {
                    CodeRunResult::completed(logs, Some(value))
                } else {
                    limit_result(max, logs, None)
                }
            }
            Err(failure) => failure_within(max, room, logs, failure),
        }
    }
}

fn failure_within(
    max: usize,
    room: usize,
    logs: Vec<String>,
    failure: CodeRunFailure,
) -> CodeRunResult {
    if json::string_len(failure.message()) <= room {
        CodeRunResult::failed(logs, failure)
    } else {
        limit_result(max, logs, None)
    }
}

/// The limit result of docs/reference.md §3.10, built from the admitted logs plus the entry that
/// overflowed (if a log did).
fn limit_result(max: usize, logs: Vec<String>, overflow: Option<String>) -> CodeRunResult {
    failure_result(max, logs, overflow, CodeRunFailure::output_limit(max))
}

/// [`limit_result`] with the failure `full` (its message kept whole when the budget allows).
fn failure_result(
    max: usize,
    mut logs: Vec<String>,
    overflow: Option<String>,
    full: CodeRunFailure,
) -> CodeRunResult {
    logs.extend(overflow);
    // Reserve room for the whole diagnostic as a JSON string; the logs get what is left.
    let log_budget = max.saturating_sub(json::string_len(full.message()));
    let mut used = 2;
    let mut kept = 0;
    for entry in &mut logs {
        let separator = usize::from(kept > 0);
        let cost = json::string_len(entry);
        if used + separator + cost <= log_budget {
            used += separator + cost;
            kept += 1;
            continue;
        }
        if let Some(room) = log_budget.checked_sub(used + separator) {
            let prefix = json::truncate(entry, room).len();
            if prefix > 0 {
                entry.truncate(prefix);
                used += separator + json::string_len(entry);
                kept += 1;
            }
        }
        break;
    }
    logs.truncate(kept);
    let message = json::truncate(full.message(), max.saturating_sub(used)).to_owned();
    CodeRunResult::failed(logs, full.with_message(message))
}

/// `result` shrunk so that its output (the logs as a JSON array, plus the value or the failure's
/// message, as the ledger counts them) takes at most `max_bytes`, with
/// [`CodeRunResult::truncated`] saying from how much to how much ([`json::shrink`]: the logs and
/// the value share the budget, their largest parts cut first). Returned whole when it fits, when
/// it paused (its pending calls are what resuming needs), or when even the harshest cut is over
/// the budget.
pub fn shrink_result(result: CodeRunResult, max_bytes: usize) -> CodeRunResult {
    if result.paused().is_some() {
        return result;
    }
    let logs = crate::JsonValue::from(
        result.logs().iter().map(|line| crate::JsonValue::String(line.clone())).collect::<Vec<_>>(),
    );
    // The failure's message stands where the value would. The value is read where it is, not
    // copied: it may be as large as the memory budget.
    let message = result.error().map(|error| crate::JsonValue::String(error.message().to_owned()));
    let mut parts = vec![&logs];
    parts.extend(result.value().or(message.as_ref()));
    let size = |parts: &[&crate::JsonValue]| -> usize {
        parts.iter().map(|part| json::encoded_len(part, usize::MAX).unwrap_or(usize::MAX)).sum()
    };
    let from = size(&parts);
    if from <= max_bytes {
        return result;
    }
    let Some(mut shrunk) = json::shrink(&parts, max_bytes) else {
        return result;
    };
    let to = size(&shrunk.iter().collect::<Vec<_>>());
    let value = (shrunk.len() > 1).then(|| shrunk.remove(1));
    let logs = match shrunk.remove(0) {
        crate::JsonValue::Array(lines) => lines
            .into_vec()
            .into_iter()
            .map(|line| match line {
                crate::JsonValue::String(line) => line,
                // Every line was a string, and so is every marker.
                other => json::encode(&other),
            })
            .collect(),
        _ => Vec::new(),
    };
    let (value, message) = match (result.error().is_some(), value) {
        (true, Some(crate::JsonValue::String(message))) => (None, Some(message)),
        (_, value) => (value, None),
    };
    let truncated = crate::Truncated {
        from_bytes: u64::try_from(from).unwrap_or(u64::MAX),
        to_bytes: u64::try_from(to).unwrap_or(u64::MAX),
    };
    result.shrunk(logs, value, message, truncated)
}
