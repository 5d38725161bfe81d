//! `question.*` actions: the questions agents ask the user through MCP `ask_user`, listed
//! per session and answered once (a second answer is `ALREADY_RESOLVED`).

use kandev_api_types::QuestionDto;
use kandev_api_types::requests::{BySession, QuestionAnswer};
use kandev_api_types::responses::{QuestionOne, Questions};
use kandev_domain::SessionId;
use kandev_domain::question::QuestionStatus;

use crate::accounts::Identity;
use crate::{ApiError, AppState};

/// Longest answer (free text), in bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

pub async fn list(s: &AppState, p: BySession) -> Result<Questions, ApiError> {
    let id = SessionId::new(p.session_id);
    s.store().get_session(&id).await?;
    let questions = s.store().session_questions(&id).await?;
    Ok(Questions { questions: questions.iter().map(QuestionDto::from).collect() })
}

pub async fn answer(
    s: &AppState,
    who: &Identity,
    p: QuestionAnswer,
) -> Result<QuestionOne, ApiError> {
    let question = s.store().get_question(&p.id).await?;
    let answer = p.answer.trim();
    if answer.is_empty() {
        return Err(ApiError::validation("answer must not be empty"));
    }
    if answer.len() > MAX_ANSWER_BYTES {
        return Err(ApiError::validation("answer is longer than 64 KiB; shorten it"));
    }
    if !question.options.is_empty() && !question.options.iter().any(|o| o == answer) {
        return Err(ApiError::validation(format!(
            "answer must be one of the question's options: {}",
            question.options.join(", ")
        )));
    }
    let resolved = s
        .engine()
        .resolve_question(&p.id, QuestionStatus::Answered, Some(answer), Some(&who.by()))
        .await?;
    Ok(QuestionOne { question: QuestionDto::from(&resolved) })
}
