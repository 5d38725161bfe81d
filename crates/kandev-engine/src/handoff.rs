//! The handoff of a session to another agent (`session.rebind`, issue 52): the first prompt
//! of the new agent, written by Kandev from the task and the stored transcript, bounded in
//! size. The new agent cannot load the old one's conversation; this is what it is told.

use kandev_domain::transcript::{Message, MessageKind};

/// Most characters of a handoff prompt.
pub const MAX_HANDOFF_CHARS: usize = 12_000;
/// Most characters quoted of one message.
const MAX_MESSAGE_CHARS: usize = 1_500;
/// Most recent messages read for it.
pub const HANDOFF_MESSAGES: i64 = 400;

/// How every handoff prompt begins (an earlier handoff in a transcript is not quoted again).
pub const HANDOFF_START: &str = "You are taking over this task from another agent";

/// The prompt: who hands over, the task, then the conversation's first user message and as
/// many of the latest user and agent messages (tool calls by their title) as fit, oldest
/// first, each shortened; what is left out is said.
pub fn prompt(title: &str, description: &str, from: &str, messages: &[Message]) -> String {
    let mut head = format!(
        "{HANDOFF_START} ({from}). Kandev moved the session \
         to you: the working directory is as it left it, but you do not have its conversation. \
         A summary of it follows; continue from there, and look at the files before you \
         change anything.\n\nTask: {title}\n"
    );
    if !description.trim().is_empty() {
        head.push_str(&format!("{}\n", shorten(description.trim(), MAX_MESSAGE_CHARS)));
    }
    head.push_str("\nThe conversation so far:\n");
    let lines: Vec<String> = messages.iter().filter_map(line_of).collect();
    let first = lines.first().cloned();
    let budget =
        MAX_HANDOFF_CHARS.saturating_sub(head.len() + first.as_ref().map_or(0, String::len) + 200);
    let mut kept: Vec<&String> = vec![];
    let mut used = 0;
    for line in lines.iter().skip(1).rev() {
        if used + line.len() > budget {
            break;
        }
        used += line.len();
        kept.push(line);
    }
    kept.reverse();
    let left_out = lines.len().saturating_sub(1 + kept.len());
    let mut out = head;
    if let Some(first) = &first {
        out.push_str(first);
    }
    if left_out > 0 {
        out.push_str(&format!("… ({left_out} earlier messages left out) …\n"));
    }
    for line in kept {
        out.push_str(line);
    }
    if first.is_none() {
        out.push_str("(nothing yet)\n");
    }
    out
}

/// One message as a line of the summary, or `None` for what the new agent need not read
/// (thoughts, plans, usage, status notes, permission requests).
fn line_of(message: &Message) -> Option<String> {
    let who = match message.kind() {
        MessageKind::User => "User",
        MessageKind::Agent => "Agent",
        MessageKind::ToolCall => "Agent's tool call",
        MessageKind::Error => "Error",
        _ => return None,
    };
    let text = message.content.trim();
    if text.is_empty() {
        return None;
    }
    if message.kind() == MessageKind::User && text.starts_with(HANDOFF_START) {
        // Its summary is in the lines above it already.
        return Some("(Kandev moved the session to another agent here, with a summary)\n".into());
    }
    Some(format!("{who}: {}\n", shorten(text, MAX_MESSAGE_CHARS)))
}

/// `text` cut to at most `max` characters (on a character boundary), marked when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut} … (cut)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_domain::message_meta::{MessageMeta, StatusNote, UserMeta};
    use kandev_domain::{MessageId, SessionId, Timestamp};

    fn message(seq: i64, meta: MessageMeta, content: &str) -> Message {
        Message {
            id: MessageId::new(format!("m{seq}")),
            session_id: SessionId::new("s"),
            turn_id: None,
            seq,
            content: content.to_owned(),
            meta,
            client_message_id: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }

    fn prompt_of(from: &str, messages: &[Message]) -> String {
        prompt("Fix the login page", "It loops on submit.", from, messages)
    }

    #[test]
    fn i52_1_the_handoff_names_the_task_and_quotes_the_conversation_in_order() {
        let messages = [
            message(1, MessageMeta::User(UserMeta::default()), "Please fix the loop"),
            message(2, StatusNote::Stopped.into(), "agent stopped"),
            message(3, MessageMeta::Agent, "I changed form.ts"),
        ];
        let got = prompt_of("Claude (claude)", &messages);
        assert!(got.starts_with("You are taking over this task from another agent (Claude"));
        assert!(got.contains("Task: Fix the login page\nIt loops on submit.\n"), "{got}");
        let (user, agent) = (
            got.find("User: Please fix the loop").unwrap(),
            got.find("Agent: I changed form.ts").unwrap(),
        );
        assert!(user < agent, "{got}");
        assert!(!got.contains("agent stopped"), "status notes are left out: {got}");
    }

    #[test]
    fn i52_1_a_long_conversation_keeps_its_start_and_its_end_within_the_bound() {
        let mut messages =
            vec![message(1, MessageMeta::User(UserMeta::default()), "THE FIRST REQUEST")];
        for seq in 2..500 {
            messages.push(message(
                seq,
                MessageMeta::Agent,
                &format!("reply {seq} {}", "x".repeat(300)),
            ));
        }
        messages.push(message(
            500,
            MessageMeta::User(UserMeta::default()),
            &format!("THE LAST WORD {}", "y".repeat(5000)),
        ));
        let got = prompt_of("Codex", &messages);
        assert!(got.chars().count() <= MAX_HANDOFF_CHARS + 100, "{}", got.len());
        assert!(got.contains("User: THE FIRST REQUEST"));
        assert!(got.contains("THE LAST WORD") && got.contains("… (cut)"));
        assert!(got.contains("earlier messages left out"), "what is left out is said");
        assert!(got.contains("reply 499") && !got.contains("reply 2 "));
    }

    #[test]
    fn i52_1_an_earlier_handoff_is_not_quoted_again() {
        let earlier =
            prompt_of("Agent A", &[message(1, MessageMeta::User(UserMeta::default()), "fix it")]);
        let messages = [
            message(1, MessageMeta::User(UserMeta::default()), "fix it"),
            message(2, MessageMeta::User(UserMeta::default()), &earlier),
            message(3, MessageMeta::Agent, "done by B"),
        ];
        let got = prompt_of("Agent B", &messages);
        assert_eq!(got.matches("The conversation so far:").count(), 1, "{got}");
        assert!(got.contains("(Kandev moved the session to another agent here"), "{got}");
        assert!(got.contains("Agent: done by B"), "{got}");
    }

    #[test]
    fn i52_1_an_empty_conversation_says_so() {
        assert!(prompt_of("Mock", &[]).ends_with("The conversation so far:\n(nothing yet)\n"));
    }
}
