//! The JSON shapes of Kandev's API, shared by the server, the engine's notifications, the CLI
//! and (generated) the web UI: the action table (`actions`), requests, responses, objects,
//! notifications and error codes. Conversions from domain types are written out here.

pub mod access;
pub mod actions;
pub mod error;
pub mod executors;
pub mod files;
pub mod frames;
pub mod intake;
pub mod notifications;
pub mod notify;
pub mod objects;
pub mod requests;
pub mod responses;
pub mod session;
pub mod ship;
pub mod terminals;
pub mod transcript;

pub use actions::Action;
pub use error::{ErrorBody, ErrorCode};
pub use executors::*;
pub use files::*;
pub use frames::{Frame, RequestFrame};
pub use intake::*;
pub use notifications::{
    MessageUpdate, Notification, NotificationParts, NotificationsEvent, ProfilesEvent,
    SessionEvent, WorkspaceEvent, WorkspacesEvent,
};
pub use notify::*;
pub use objects::*;
pub use session::*;
pub use ship::*;
pub use terminals::*;
pub use transcript::*;

/// Formats a domain timestamp as RFC 3339 (UTC, milliseconds).
pub fn rfc3339(ts: kandev_domain::Timestamp) -> String {
    let nanos = i128::from(ts.millis()) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_format_as_rfc3339() {
        assert_eq!(super::rfc3339(kandev_domain::Timestamp(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            super::rfc3339(kandev_domain::Timestamp(1_764_500_000_123)),
            "2025-11-30T10:53:20.123Z"
        );
    }
}

#[cfg(test)]
mod wire_enums {
    //! The enums on the wire say exactly what the domain's `as_str` says, for every variant.

    use kandev_domain::agent::AgentKind;
    use kandev_domain::session::SessionState;
    use kandev_domain::task::TaskState;
    use kandev_domain::transcript::MessageKind;

    fn wire(value: impl serde::Serialize) -> String {
        serde_json::to_value(value).unwrap().as_str().unwrap().to_owned()
    }

    #[test]
    fn i13_wire_enums_match_the_domain_names() {
        for s in SessionState::ALL {
            assert_eq!(wire(crate::SessionStateDto::from(s)), s.as_str());
        }
        for s in TaskState::ALL {
            assert_eq!(wire(crate::TaskStateDto::from(s)), s.as_str());
        }
        for k in MessageKind::ALL {
            assert_eq!(wire(crate::MessageKindDto::from(k)), k.as_str());
        }
        for k in AgentKind::ALL {
            assert_eq!(wire(crate::AgentKindDto::from(k)), k.as_str());
            assert_eq!(AgentKind::from(crate::AgentKindDto::from(k)), k);
        }
    }
}
