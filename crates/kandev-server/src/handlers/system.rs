//! `system.doctor` (issue 43): the checks of `kandev doctor` a running server can make on
//! itself, for Settings → Health.

use kandev_api_types::CheckStepDto;
use kandev_api_types::requests::Empty;
use kandev_api_types::responses::SystemHealth;

use crate::{ApiError, AppState};

pub async fn doctor(s: &AppState, _: Empty) -> Result<SystemHealth, ApiError> {
    let findings: Vec<CheckStepDto> = s
        .engine()
        .doctor()
        .await
        .into_iter()
        .map(|f| CheckStepDto { what: f.check, ok: f.ok, detail: f.detail })
        .collect();
    Ok(SystemHealth { ok: findings.iter().all(|f| f.ok), findings })
}
