//! A run's session, seen from the host loop: its turn taken within the run's wall clock before
//! the run takes a slot, and what its cell captured saved once the run has ended.

use crate::checkpoint::{CheckpointError, Record};
use crate::error::ContractError;
use crate::language::Language;
use crate::limits::Limits;
use crate::provider::stops::Stops;
use crate::provider::{Ending, OutputLedger};
use crate::request::CodeRunRequest;
use crate::result::CodeRunResult;
use crate::session::{Capture, SessionId, Sessions, Turn};

/// The session a run is in, where it is kept, and (for a resumed run) the digest of the state
/// its paused run began with.
pub(super) struct Opening {
    id: SessionId,
    sessions: Sessions,
    began_from: Option<String>,
}

/// The session `request` runs in: the one it names, or a resumed checkpoint's (which it must
/// not contradict); `None` for a run in none.
pub(super) fn session_of(
    request: &CodeRunRequest,
    resumed: Option<&Record>,
    default: &Sessions,
) -> Result<Option<Opening>, ContractError> {
    let recorded = resumed.map(|record| record.session.clone());
    let (id, began_from) = match (request.session.clone(), recorded) {
        (None, None | Some(None)) => return Ok(None),
        (Some(id), None) => (id, None),
        (Some(id), Some(Some((name, digest)))) if id.name() == name => (id, Some(digest)),
        (None, Some(Some((name, digest)))) => (SessionId::new(name), Some(digest)),
        (request, Some(checkpoint)) => {
            let checkpoint = checkpoint.map(|(name, _)| name).unwrap_or_default();
            let request = request.map(|id| id.name().to_owned()).unwrap_or_default();
            return Err(CheckpointError::OtherSession { checkpoint, request }.into());
        }
    };
    let sessions = request.sessions.clone().unwrap_or_else(|| default.clone());
    Ok(Some(Opening { id, sessions, began_from }))
}

/// Why a run's session could not be opened: the run's ending, or a refusal of the request.
pub(super) enum Refusal {
    Ending(Ending),
    Contract(ContractError),
}

impl Refusal {
    /// The result to end the run with; a refusal of the request goes to `refused`, which the
    /// caller returns instead.
    pub(super) fn settle(
        self,
        ledger: OutputLedger,
        refused: &mut Option<ContractError>,
    ) -> CodeRunResult {
        match self {
            Refusal::Ending(ending) => ledger.settle(ending),
            Refusal::Contract(error) => {
                *refused = Some(error);
                ledger.settle(Ending::Failed("the request was refused".to_owned()))
            }
        }
    }
}

/// Waits for the session's turn (within the run's stops) and loads its state; `Ok(None)` for a
/// run in no session. A session of another language, or a resumed run's session whose state
/// changed since its run paused, is refused.
pub(super) async fn open_session(
    opening: Option<Opening>,
    language: Language,
    stops: &mut Stops,
) -> Result<Option<Turn>, Refusal> {
    let Some(Opening { id, sessions, began_from }) = opening else { return Ok(None) };
    let mut begun = None;
    let within = std::time::Duration::from_millis(stops.limits.max_wall_ms);
    let waiting = async { begun = Some(sessions.begin(id, language.as_str(), within).await) };
    if let Some(reason) = stops.first(waiting).await {
        return Err(Refusal::Ending(Ending::Stopped(reason)));
    }
    let turn = match begun {
        Some(Ok(turn)) => turn,
        Some(Err(error)) => return Err(Refusal::Ending(Ending::Failed(error.to_string()))),
        None => return Err(Refusal::Ending(Ending::Failed("no session".to_owned()))),
    };
    let name = turn.id().name().to_owned();
    if turn.state().language != language.as_str() {
        let why = format!("it holds {} state; this run is {language}", turn.state().language);
        return Err(Refusal::Contract(ContractError::UnusableSession { name, why }));
    }
    if began_from.is_some_and(|digest| digest != turn.state().digest()) {
        return Err(Refusal::Contract(CheckpointError::SessionChanged(name).into()));
    }
    Ok(Some(turn))
}

/// `result`, with what its session carried: the cell's capture saved, or, when the run ended
/// before its cell captured anything, the state the run began with kept and the reason said.
/// `Err` when the session refused the request instead ([`Refusal::Contract`]).
pub(super) async fn settle_session(
    mut result: CodeRunResult,
    (turn, refused): (Option<Turn>, Option<ContractError>),
    captured: Option<Capture>,
    limits: &Limits,
) -> Result<CodeRunResult, ContractError> {
    if let Some(refused) = refused {
        return Err(refused);
    }
    let Some(turn) = turn else { return Ok(result) };
    let capture = captured.ok_or_else(|| uncaptured(&result));
    let report = turn.finish(capture, limits).await;
    result.set_session(report);
    Ok(result)
}

/// Why a run's cell captured nothing.
fn uncaptured(result: &CodeRunResult) -> String {
    if result.paused().is_some() {
        return "the run paused before its state was captured".to_owned();
    }
    match result.error() {
        Some(error) => format!("the run ended ({}) before its state was captured", error.kind()),
        None => "the run's cell captured no state".to_owned(),
    }
}
