//! P9's checks after the run, against what the server stored: every task whose creation was
//! answered exists in the step of its last answered move; every board a client followed
//! shows what the store holds; every message a client was told is stored with the text it
//! was told; every prompted turn's text is its whole stream, once; no turn was interrupted.

use std::collections::{HashMap, HashSet};

use anyhow::{Context, Result};
use serde_json::json;

use super::clients::{Fnv, Told, ToldText};
use super::load::Done;
use super::{Board, CHUNK_BYTES, CHUNKS, SCRIPT};
use crate::Report;
use crate::harness::Server;
use crate::perf::shared::stamped_stream_ok;

pub(super) struct Expected<'a> {
    pub boards: &'a [Board],
    /// The board of the agents' tasks.
    pub agents_board: &'a str,
    pub sessions: &'a [String],
    pub load: &'a Done,
}

/// What the checks counted.
#[derive(Default)]
pub(super) struct Checked {
    tasks_stored: usize,
    tasks_missing: usize,
    tasks_in_wrong_step: usize,
    board_mismatches: usize,
    messages_told: usize,
    messages_missing: usize,
    messages_differ: usize,
    turns: usize,
    turns_exact: usize,
    prompts_not_stored: usize,
    interrupted: usize,
}

impl Checked {
    pub(super) fn figures(&self, report: &mut Report) {
        report.figure("tasks_stored", self.tasks_stored);
        report.figure("tasks_missing", self.tasks_missing);
        report.figure("tasks_in_wrong_step", self.tasks_in_wrong_step);
        report.figure("client_board_mismatches", self.board_mismatches);
        report.figure("messages_told", self.messages_told);
        report.figure("messages_missing", self.messages_missing);
        report.figure("messages_differ_from_told", self.messages_differ);
        report.figure("turns_stored", self.turns);
        report.figure("turns_exact", self.turns_exact);
        report.figure("interrupted_notes", self.interrupted);
    }
}

/// Every task of a board, id → step (all pages).
async fn board_steps(
    server: &Server,
    board: &str,
    into: &mut HashMap<String, String>,
) -> Result<()> {
    let mut cursor = serde_json::Value::Null;
    loop {
        let page = server
            .call("task.list", json!({"workflow_id": board, "limit": 1000, "cursor": cursor}))
            .await?;
        for task in page["tasks"].as_array().context("task.list without tasks")? {
            let (Some(id), Some(step)) = (task["id"].as_str(), task["step_id"].as_str()) else {
                continue;
            };
            into.insert(id.to_owned(), step.to_owned());
        }
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            return Ok(());
        }
    }
}

pub(super) async fn run(
    server: &Server,
    expected: &Expected<'_>,
    told: &[Told],
    report: &mut Report,
) -> Result<Checked> {
    let mut checked = Checked::default();

    // Tasks: each answered creation exists, in the step of its last answered move.
    let mut stored: HashMap<String, String> = HashMap::new();
    for board in expected.boards {
        board_steps(server, &board.id, &mut stored).await?;
    }
    checked.tasks_stored = stored.len();
    board_steps(server, expected.agents_board, &mut stored).await?;
    let mut wrong = vec![];
    for (task, step) in &expected.load.steps {
        match stored.get(task) {
            None => checked.tasks_missing += 1,
            Some(actual) if actual != step => {
                checked.tasks_in_wrong_step += 1;
                if wrong.len() < 3 {
                    wrong.push(format!("{task} is in {actual}, last moved to {step}"));
                }
            }
            Some(_) => {}
        }
    }
    report.check(
        checked.tasks_missing == 0,
        format!("{} answered task creations are missing", checked.tasks_missing),
    );
    report.check(
        checked.tasks_in_wrong_step == 0,
        format!(
            "{} tasks are not in their last answered step: {wrong:?}",
            checked.tasks_in_wrong_step
        ),
    );
    // Each client that followed the workspace without a resync shows what the store holds.
    let mut mismatches = vec![];
    for client in told.iter().filter(|t| !t.workspace_resynced) {
        for (task, step) in &client.tasks {
            if stored.get(task) != Some(step) {
                checked.board_mismatches += 1;
                if mismatches.len() < 3 {
                    mismatches.push(format!("{task}: told {step}, stored {:?}", stored.get(task)));
                }
            }
        }
    }
    report.check(
        checked.board_mismatches == 0,
        format!(
            "{} tasks a client was told differ from the store: {mismatches:?}",
            checked.board_mismatches
        ),
    );

    // Messages and turns, session by session.
    let mut by_session: HashMap<&str, Vec<(&String, &ToldText)>> = HashMap::new();
    for (id, text) in told.iter().flat_map(|t| &t.messages) {
        by_session.entry(text.session.as_str()).or_default().push((id, text));
    }
    checked.messages_told = by_session.values().map(Vec::len).sum();
    let mut differ = vec![];
    let mut wrong_turns = vec![];
    for session in expected.sessions {
        let messages = server.messages(session).await?;
        let contents: HashMap<&str, &str> = messages
            .iter()
            .filter_map(|m| Some((m["id"].as_str()?, m["content"].as_str()?)))
            .collect();
        for (id, text) in by_session.remove(session.as_str()).unwrap_or_default() {
            let Some(content) = contents.get(id.as_str()) else {
                checked.messages_missing += 1;
                continue;
            };
            let part = content.as_bytes().get(text.start..text.start + text.len);
            if part.is_none_or(|p| Fnv::NEW.add(p).0 != text.hash.0) {
                checked.messages_differ += 1;
                if differ.len() < 3 {
                    differ.push(format!(
                        "message {id}: told {} bytes from byte {}, stored {} bytes",
                        text.len,
                        text.start,
                        content.len()
                    ));
                }
            }
        }
        // Each prompt's turn: the agent text after it, up to the next prompt.
        let mut turns: Vec<String> = vec![];
        let mut prompt_ids = HashSet::new();
        for m in &messages {
            let content = m["content"].as_str().unwrap_or_default();
            match m["kind"].as_str() {
                Some("user") if content == SCRIPT => {
                    turns.push(String::new());
                    prompt_ids.insert(m["client_message_id"].as_str().unwrap_or_default());
                }
                Some("agent") => {
                    if let Some(turn) = turns.last_mut() {
                        turn.push_str(content);
                    }
                }
                Some("status") if content.starts_with("interrupted") => checked.interrupted += 1,
                _ => {}
            }
        }
        checked.turns += turns.len();
        for (i, turn) in turns.iter().enumerate() {
            if stamped_stream_ok(turn, CHUNKS, CHUNK_BYTES) {
                checked.turns_exact += 1;
            } else if wrong_turns.len() < 3 {
                wrong_turns.push(format!("{session} turn {i}: {} bytes", turn.len()));
            }
        }
        let answered = expected.load.prompts.get(session).map(Vec::as_slice).unwrap_or_default();
        checked.prompts_not_stored +=
            answered.iter().filter(|id| !prompt_ids.contains(id.as_str())).count();
    }
    // Told messages of no session of the run cannot be stored where they were told.
    checked.messages_missing += by_session.values().map(Vec::len).sum::<usize>();
    report.check(
        checked.messages_missing == 0,
        format!("{} messages a client was told are not stored", checked.messages_missing),
    );
    report.check(
        checked.messages_differ == 0,
        format!(
            "{} stored messages differ from what a client was told: {differ:?}",
            checked.messages_differ
        ),
    );
    report.check(
        checked.turns_exact == checked.turns,
        format!(
            "{} of {} turns are not their whole stream once: {wrong_turns:?}",
            checked.turns - checked.turns_exact,
            checked.turns
        ),
    );
    report.check(
        checked.prompts_not_stored == 0,
        format!("{} answered prompts are not stored", checked.prompts_not_stored),
    );
    report.check(checked.interrupted == 0, format!("{} interrupted notes", checked.interrupted));
    Ok(checked)
}
