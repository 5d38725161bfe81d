//! `session.authenticate`: log in to an agent that answered "auth required".

use kandev_api_types::SessionDto;
use kandev_api_types::requests::SessionAuthenticate;
use kandev_api_types::responses::SessionOne;
use kandev_domain::SessionId;

use crate::{ApiError, AppState};

/// ACP `authenticate {methodId}`: over the live connection when the agent runs (no restart;
/// the login hint is cleared), else the agent restarts with it before the conversation is
/// reloaded (or opened), and a refusal shows as `last_error` `agent_auth_required` again.
pub async fn authenticate(s: &AppState, p: SessionAuthenticate) -> Result<SessionOne, ApiError> {
    let method_id = p.method_id.trim().to_owned();
    if method_id.is_empty() {
        return Err(ApiError::validation(
            "choose a login method: one of those the agent offered in the session's last error",
        ));
    }
    let id = SessionId::new(p.id);
    s.engine().authenticate(&id, method_id).await?;
    let session = s.store().get_session(&id).await?;
    Ok(SessionOne { session: SessionDto::from(&session) })
}
