//! Checkpoints of a session's turns (issue 48): `turn.checkpoint.list`, `turn.revert`,
//! `turn.diff`.

use kandev_api_types::requests::{BySession, TurnDiff, TurnRevert};
use kandev_api_types::responses::{CommitDiff, TurnCheckpoints, TurnReverted};
use kandev_api_types::{FileChangeDto, RevertFileDto, TurnCheckpointDto, UndoneTurnDto};
use kandev_domain::{SessionId, TurnId};
use kandev_engine::{Discard, RevertFile};

use crate::{ApiError, AppState};

pub async fn checkpoint_list(s: &AppState, p: BySession) -> Result<TurnCheckpoints, ApiError> {
    let turns = s.engine().checkpointed_turns(&SessionId::new(p.session_id)).await?;
    let turns = turns
        .into_iter()
        .map(|t| TurnCheckpointDto {
            turn_id: t.turn_id.to_string(),
            number: number(t.number),
            message_id: t.message_id.map(|m| m.to_string()),
            undone: t.undone,
            diff: t.diff,
        })
        .collect();
    Ok(TurnCheckpoints { turns })
}

pub async fn revert(s: &AppState, p: TurnRevert) -> Result<TurnReverted, ApiError> {
    let turn = turn_id(&p.turn_id)?;
    let discard = match (p.force.unwrap_or(false), p.discard) {
        (true, _) => Discard::All,
        (false, Some(paths)) => Discard::Only(paths),
        (false, None) => Discard::None,
    };
    let session = SessionId::new(p.session_id);
    let outcome =
        s.engine().revert_turn(&session, turn, discard, p.dry_run.unwrap_or(false)).await?;
    Ok(TurnReverted {
        turns: outcome
            .turns
            .into_iter()
            .map(|t| UndoneTurnDto {
                turn_id: t.turn_id.to_string(),
                number: number(t.number),
                prompt: t.prompt,
            })
            .collect(),
        files: files(outcome.files),
        outside_edits: files(outcome.outside_edits),
        reverted: outcome.reverted,
    })
}

pub async fn diff(s: &AppState, p: TurnDiff) -> Result<CommitDiff, ApiError> {
    let turn = turn_id(&p.turn_id)?;
    let changes = s.engine().turn_changes(&SessionId::new(p.session_id), &turn).await?;
    let files = changes
        .iter()
        .flat_map(|(repository, files)| {
            files.iter().map(|f| FileChangeDto::of(repository.as_ref(), f))
        })
        .collect();
    Ok(CommitDiff { files })
}

fn turn_id(text: &str) -> Result<TurnId, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ApiError::validation("say which turn: its id is required"));
    }
    Ok(TurnId::new(text))
}

fn number(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn files(files: Vec<RevertFile>) -> Vec<RevertFileDto> {
    files
        .into_iter()
        .map(|f| RevertFileDto {
            repository_id: f.repository_id.map(|r| r.to_string()),
            path: f.path,
        })
        .collect()
}
