//! The last few `task.list` answers, kept as the JSON text sent, while nothing a card shows
//! has changed since (issue 15, P3: a 2,000-card board is ~600 KB of JSON; reading and
//! serializing it again for every client that opens the board cost 5–50 ms each time).
//!
//! An answer is kept with the store's [`cards_version`](kandev_store::Store::cards_version)
//! read *before* the cards were read, and served only while the version is still that one:
//! any commit that may have changed a card bumps the version after it commits and before its
//! events are published, so the next `task.list` reads the cards again. Bounded: at most
//! [`KEPT_ANSWERS`] answers and [`KEPT_BYTES`] bytes of JSON (the least recently served go
//! first); answers from an older version are dropped as soon as they are seen. The answer
//! depends only on the request and the database (`task.list` does not look at who asks).

use std::collections::VecDeque;
use std::sync::Mutex;

use kandev_api_types::requests::TaskList;
use serde_json::value::RawValue;

/// Most answers kept: every board of a team server, some with a step filter or a second
/// page. (It was 8: a client going round 10 boards found none of them kept, each answer
/// pushed out before its board came round again — P3's `task.list` did exactly that.)
pub const KEPT_ANSWERS: usize = 64;

/// Most bytes of JSON kept over all answers; a larger answer is not kept at all.
pub const KEPT_BYTES: usize = 16 * 1024 * 1024;

/// What identifies a `task.list` answer: every field of its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardKey {
    workflow_id: String,
    step_id: Option<String>,
    query: Option<String>,
    include_archived: bool,
    limit: Option<u32>,
    cursor: Option<String>,
}

impl From<&TaskList> for BoardKey {
    fn from(p: &TaskList) -> Self {
        BoardKey {
            workflow_id: p.workflow_id.clone(),
            step_id: p.step_id.clone(),
            query: p.query.clone(),
            include_archived: p.include_archived,
            limit: p.limit,
            cursor: p.cursor.clone(),
        }
    }
}

struct Kept {
    key: BoardKey,
    version: u64,
    answer: Box<RawValue>,
}

/// The kept answers, newest last.
#[derive(Default)]
pub(crate) struct BoardCache {
    kept: Mutex<VecDeque<Kept>>,
}

impl BoardCache {
    /// The answer kept for `key` at `version`, if any; it becomes the newest (the least
    /// recently served goes first). Answers of other versions are dropped.
    pub(crate) fn get(&self, key: &BoardKey, version: u64) -> Option<Box<RawValue>> {
        let mut kept = self.kept.lock().ok()?;
        kept.retain(|k| k.version >= version);
        let at = kept.iter().position(|k| k.version == version && &k.key == key)?;
        let hit = kept.remove(at)?;
        let answer = hit.answer.clone();
        kept.push_back(hit);
        Some(answer)
    }

    /// Keeps `answer` for `key`, computed from the cards as they were at `version`.
    pub(crate) fn put(&self, key: BoardKey, version: u64, answer: &RawValue) {
        let size = answer.get().len();
        if size > KEPT_BYTES {
            return;
        }
        let Ok(mut kept) = self.kept.lock() else { return };
        kept.retain(|k| k.version >= version && k.key != key);
        if kept.iter().any(|k| k.version > version) {
            // Read before a newer answer was kept: that one is the truer.
            return;
        }
        kept.push_back(Kept { key, version, answer: answer.to_owned() });
        let mut bytes: usize = kept.iter().map(|k| k.answer.get().len()).sum();
        while kept.len() > KEPT_ANSWERS || bytes > KEPT_BYTES {
            match kept.pop_front() {
                Some(old) => bytes -= old.answer.get().len(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(workflow: &str) -> BoardKey {
        BoardKey {
            workflow_id: workflow.into(),
            step_id: None,
            query: None,
            include_archived: false,
            limit: None,
            cursor: None,
        }
    }

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(format!("\"{text}\"")).unwrap()
    }

    #[test]
    fn i15_a4_an_answer_is_served_only_at_its_version_and_only_for_its_request() {
        let cache = BoardCache::default();
        cache.put(key("a"), 3, &raw("a3"));
        assert_eq!(cache.get(&key("a"), 3).unwrap().get(), "\"a3\"");
        assert!(cache.get(&key("b"), 3).is_none(), "another board");
        let mut paged = key("a");
        paged.limit = Some(10);
        assert!(cache.get(&paged, 3).is_none(), "another page of the same board");
        assert!(cache.get(&key("a"), 4).is_none(), "a card changed since");
        assert!(cache.get(&key("a"), 3).is_none(), "dropped once a newer version was seen");
    }

    #[test]
    fn i15_a4_an_answer_read_before_a_newer_one_is_not_kept() {
        let cache = BoardCache::default();
        cache.put(key("a"), 5, &raw("new"));
        cache.put(key("b"), 4, &raw("old"));
        assert!(cache.get(&key("b"), 4).is_none());
        assert_eq!(cache.get(&key("a"), 5).unwrap().get(), "\"new\"");
    }

    #[test]
    fn i15_a4_the_kept_answers_are_bounded_in_number() {
        let cache = BoardCache::default();
        for i in 0..KEPT_ANSWERS + 3 {
            cache.put(key(&i.to_string()), 1, &raw("x"));
        }
        let kept: Vec<bool> =
            (0..KEPT_ANSWERS + 3).map(|i| cache.get(&key(&i.to_string()), 1).is_some()).collect();
        assert_eq!(kept.iter().filter(|k| **k).count(), KEPT_ANSWERS);
        assert!(!kept[0] && !kept[2] && kept[3] && kept[KEPT_ANSWERS + 2], "the oldest go first");
    }

    #[test]
    fn i15_a4_a_client_going_round_ten_boards_finds_each_kept() {
        // P3's round: 10 boards listed in turn. With 8 kept answers none was ever served.
        let cache = BoardCache::default();
        let boards: Vec<BoardKey> = (0..10).map(|i| key(&format!("board {i}"))).collect();
        for board in &boards {
            assert!(cache.get(board, 1).is_none());
            cache.put(board.clone(), 1, &raw("cards"));
        }
        for board in &boards {
            assert!(cache.get(board, 1).is_some(), "{board:?} was pushed out");
        }
    }

    #[test]
    fn i15_a4_an_answer_served_again_outlives_older_ones() {
        let cache = BoardCache::default();
        for i in 0..KEPT_ANSWERS {
            cache.put(key(&i.to_string()), 1, &raw("x"));
        }
        assert!(cache.get(&key("0"), 1).is_some());
        cache.put(key("new"), 1, &raw("x"));
        assert!(cache.get(&key("0"), 1).is_some(), "served last: kept");
        assert!(cache.get(&key("1"), 1).is_none(), "the least recently served went first");
    }
}
