//! The one action table both transports (HTTP and WebSocket) call into.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::handlers::{agent_auth, files, profile, repository, session, task, workflow, workspace};
use crate::{ApiError, AppState};

/// Runs `action` with its JSON payload and returns the JSON result.
pub async fn dispatch(state: &AppState, action: &str, payload: Value) -> Result<Value, ApiError> {
    macro_rules! route {
        ($($name:literal => $handler:path),* $(,)?) => {
            match action {
                $($name => $handler(state, decode(payload)?).await,)*
                "subscribe" | "unsubscribe" => Err(ApiError::bad_request(
                    "subscriptions need the WebSocket endpoint /ws",
                )),
                _ => Err(unknown_action(action)),
            }
        };
    }
    route! {
        "workspace.list" => workspace::list,
        "workspace.create" => workspace::create,
        "workspace.get" => workspace::get,
        "workspace.update" => workspace::update,
        "workspace.delete" => workspace::delete,
        "repository.list" => repository::list,
        "repository.create" => repository::create,
        "repository.get" => repository::get,
        "repository.update" => repository::update,
        "repository.delete" => repository::delete,
        "workflow.template.list" => workflow::template_list,
        "workflow.create" => workflow::create,
        "workflow.list" => workflow::list,
        "workflow.get" => workflow::get,
        "workflow.update" => workflow::update,
        "workflow.delete" => workflow::delete,
        "workflow.export" => workflow::export,
        "workflow.import" => workflow::import,
        "workflow.step.create" => workflow::step_create,
        "workflow.step.update" => workflow::step_update,
        "workflow.step.delete" => workflow::step_delete,
        "workflow.step.reorder" => workflow::step_reorder,
        "task.create" => task::create,
        "task.list" => task::list,
        "task.get" => task::get,
        "task.update" => task::update,
        "task.move" => task::move_task,
        "task.archive" => task::archive,
        "task.delete" => task::delete,
        "task.changes" => files::changes,
        "task.tree" => files::tree,
        "task.file.read" => files::read,
        "task.commit" => files::commit,
        "agent.profile.list" => profile::list,
        "agent.profile.create" => profile::create,
        "agent.profile.update" => profile::update,
        "agent.profile.delete" => profile::delete,
        "agent.kinds" => profile::kinds,
        "session.launch" => session::launch,
        "task.session.list" => session::list,
        "session.get" => session::get,
        "session.stop" => session::stop,
        "session.delete" => session::delete,
        "session.resume" => session::resume,
        "session.authenticate" => agent_auth::authenticate,
        "session.reset_context" => session::reset_context,
        "session.set_mode" => session::set_mode,
        "session.set_config_option" => session::set_config_option,
        "agent.cancel" => session::cancel,
        "message.add" => session::message_add,
        "message.list" => session::message_list,
        "message.queue.list" => session::queue_list,
        "message.queue.add" => session::queue_add,
        "message.queue.update" => session::queue_update,
        "message.queue.remove" => session::queue_remove,
        "message.queue.reorder" => session::queue_reorder,
        "message.queue.drain" => session::queue_drain,
        "message.queue.auto_run.set" => session::auto_run_set,
        "permission.respond" => session::permission_respond,
    }
}

fn unknown_action(action: &str) -> ApiError {
    let shown: String = action.chars().take(80).collect();
    ApiError::new(
        kandev_api_types::ErrorCode::UnknownAction,
        format!("unknown action `{shown}`; see the API reference in docs/api.md"),
    )
}

/// Decodes a payload into its request type; `null` counts as `{}`. Errors name the field.
pub fn decode<T: DeserializeOwned>(payload: Value) -> Result<T, ApiError> {
    let payload = if payload.is_null() { Value::Object(Default::default()) } else { payload };
    serde_path_to_error::deserialize(payload).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let message = if path == "." { inner } else { format!("{path}: {inner}") };
        ApiError::validation(message).with_details(serde_json::json!({ "path": path }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_api_types::requests::WorkspaceCreate;

    #[test]
    fn decode_names_the_offending_field() {
        let err = decode::<WorkspaceCreate>(serde_json::json!({"name": 5})).unwrap_err();
        assert_eq!(err.code, kandev_api_types::ErrorCode::ValidationError);
        assert!(err.message.starts_with("name: invalid type: integer"), "{}", err.message);
        let err = decode::<WorkspaceCreate>(serde_json::json!({})).unwrap_err();
        assert_eq!(err.message, "missing field `name`");
    }
}
