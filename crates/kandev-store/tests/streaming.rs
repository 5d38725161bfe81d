//! Issue 15: streamed text reads whole and in order, and full-text search finds it once
//! folded (on a real SQLite file; the linear cost of appending is streaming_cost.rs).

use kandev_domain::WorkspaceId;
use kandev_domain::transcript::MessageKind;
use kandev_store::{RANK_WINDOW, SearchKinds, StoreError};

mod common;
#[path = "common/streaming.rs"]
mod streaming;
use streaming::{fixture, fixture_on, new_message, streamed};

on_both_engines! {
async fn i15_streamed_chunks_read_in_order_and_fold_unchanged_into_searchable_text(db: TestDb) {
    let f = fixture_on(db, "fold").await;
    let id = new_message(&f.store, &f.session, "one ").await;
    let mut tx = f.store.begin_write().await.unwrap();
    for delta in ["two ", "three ", "zanzibar ", "é four"] {
        tx.append_message(&id, delta).await.unwrap();
    }
    tx.commit().await.unwrap();
    let want = "one two three zanzibar é four";
    assert_eq!(f.store.get_message(&id).await.unwrap().content, want);
    let listed = f.store.list_messages(&f.session, None, None, 10).await.unwrap();
    assert_eq!(listed[0].content, want);
    let kinds = SearchKinds { tasks: true, messages: true };
    let before = f.store.search(&f.workspace, "zanzibar", kinds, 10, 0).await.unwrap();
    assert!(before.hits.is_empty(), "a message still streaming is not indexed yet");

    // The next message ends this one's stream: its chunks fold into its text.
    let next = new_message(&f.store, &f.session, "next").await;
    assert_eq!(f.store.get_message(&id).await.unwrap().content, want);
    let mut tx = f.store.begin_write().await.unwrap();
    let appended = tx.append_message(&next, "!").await.unwrap();
    assert_eq!(appended.length, 5);
    tx.commit().await.unwrap();

    let page = f.store.search(&f.workspace, "zanzibar", kinds, 10, 0).await.unwrap();
    assert_eq!(page.hits.len(), 1, "{page:?}");
    let hit = &page.hits[0];
    assert_eq!(hit.task_title, "fold");
    assert_eq!(hit.message.as_ref().map(|m| &m.1), Some(&id));
    let highlighted: Vec<&str> =
        hit.snippet.iter().filter(|p| p.highlight).map(|p| p.text.as_str()).collect();
    assert_eq!(highlighted, vec!["zanzibar"]);
}
}

on_both_engines! {
async fn i15_a6_search_finds_titles_ranks_and_pages_and_refuses_bad_syntax(db: TestDb) {
    let f = fixture_on(db, "rocket engine").await;
    let kinds = SearchKinds { tasks: true, messages: false };
    let page = f.store.search(&f.workspace, "rocket", kinds, 10, 0).await.unwrap();
    assert_eq!(page.hits.len(), 1);
    assert!(page.hits[0].message.is_none());
    let none =
        f.store.search(&f.workspace, "rocket", SearchKinds { tasks: false, messages: true }, 10, 0);
    assert!(none.await.unwrap().hits.is_empty());
    let other =
        f.store.search(&WorkspaceId::new("elsewhere"), "rocket", kinds, 10, 0).await.unwrap();
    assert!(other.hits.is_empty(), "another workspace's tasks are not hits");
    for bad in ["\"unterminated", "AND", "title:", "(a OR"] {
        let result = f.store.search(&f.workspace, bad, kinds, 10, 0).await;
        assert!(matches!(result, Err(StoreError::InvalidQuery(_))), "{bad:?}: {result:?}");
    }
}
}

on_both_engines! {
async fn i15_chunks_left_unfolded_by_a_crash_are_folded_at_open(db: TestDb) {
    let f = fixture_on(db, "crash").await;
    let id = new_message(&f.store, &f.session, "before ").await;
    let mut tx = f.store.begin_write().await.unwrap();
    tx.append_message(&id, "quokka after").await.unwrap();
    tx.commit().await.unwrap();
    f.store.close().await;
    let store = f.db.open().await;
    assert_eq!(store.get_message(&id).await.unwrap().content, "before quokka after");
    let kinds = SearchKinds { tasks: false, messages: true };
    let page = store.search(&f.workspace, "quokka", kinds, 10, 0).await.unwrap();
    assert_eq!(page.hits.len(), 1, "folded at open, so indexed");
}
}

on_both_engines! {
async fn i15_a4_a_common_word_is_ranked_among_its_newest_matches_a_rare_one_among_all(db: TestDb) {
    let f = fixture_on(db, "window").await;
    // The oldest message is the best match of `common` (the word three times) and the only
    // one of `needle`; RANK_WINDOW newer messages contain `common` once.
    let oldest = new_message(&f.store, &f.session, "common common common needle").await;
    let mut tx = f.store.begin_write().await.unwrap();
    for i in 0..RANK_WINDOW {
        let new = streamed(&f.session, &format!("common word {i}"), MessageKind::Agent);
        tx.insert_message(&new).await.unwrap();
        let topic = format!("session:{}", f.session);
        tx.emit(topic, "session.message.added", serde_json::json!({})).await.unwrap();
    }
    tx.commit().await.unwrap();
    let kinds = SearchKinds { tasks: false, messages: true };
    let common = f.store.search(&f.workspace, "common", kinds, 5, 0).await.unwrap();
    assert_eq!(common.hits.len(), 5);
    assert!(
        common.hits.iter().all(|h| h.message.as_ref().map(|m| &m.1) != Some(&oldest)),
        "the best but oldest match is past the window of the newest {RANK_WINDOW}"
    );
    let rare = f.store.search(&f.workspace, "common AND needle", kinds, 5, 0).await.unwrap();
    assert_eq!(rare.hits.len(), 1);
    assert_eq!(rare.hits[0].message.as_ref().map(|m| &m.1), Some(&oldest));
}
}

on_both_engines! {
/// Reviewer finding (issue 21): hits of equal rank were ordered by task alone, and PostgreSQL
/// sorts such ties differently for each LIMIT/OFFSET, so a page could repeat or skip a hit.
async fn i21_d1_pages_of_hits_with_equal_rank_never_repeat_or_skip_one(db: TestDb) {
    let f = fixture_on(db, "ties").await;
    let mut written = std::collections::HashSet::new();
    for _ in 0..12 {
        written.insert(new_message(&f.store, &f.session, "tiebreak tiebreak").await);
    }
    let kinds = SearchKinds { tasks: false, messages: true };
    let (mut seen, mut offset) = (vec![], Some(0));
    while let Some(at) = offset {
        let page = f.store.search(&f.workspace, "tiebreak", kinds, 1, at).await.unwrap();
        seen.extend(page.hits.iter().filter_map(|h| h.message.as_ref().map(|m| m.1.clone())));
        offset = page.next_offset;
        assert!(seen.len() <= written.len(), "paging does not end: {seen:?}");
    }
    let distinct: std::collections::HashSet<_> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), written.len(), "one hit per message, once each: {seen:?}");
    assert_eq!(distinct, written);
}
}

on_both_engines! {
/// Reviewer finding (issue 21): the batched chunk insert hands its rows to PostgreSQL as
/// `jsonb`, which refused a NUL character's escape, so an agent's text with a NUL failed the
/// whole write on PostgreSQL. SQLite keeps the NUL; PostgreSQL (whose text cannot hold one)
/// keeps U+FFFD, as for plain arguments; the text `\u0000` itself is kept on both.
async fn i21_d2_a_streamed_chunk_with_a_nul_character_is_stored(db: TestDb) {
    let postgres = db.is_postgres();
    let f = fixture_on(db, "nul").await;
    let id = new_message(&f.store, &f.session, "a").await;
    let delta = "b\0c \\u0000 d";
    let mut tx = f.store.begin_write().await.unwrap();
    let chunk = kandev_store::NewChunk {
        message_id: &id,
        session_id: &f.session,
        delta,
        end_len: 1 + delta.len() as u64,
    };
    tx.insert_chunks(&[chunk]).await.unwrap();
    tx.commit().await.unwrap();
    let content = f.store.get_message(&id).await.unwrap().content;
    let expected = if postgres { "ab\u{fffd}c \\u0000 d" } else { "ab\0c \\u0000 d" };
    assert_eq!(content, expected);
}
}

/// Issue 15 acceptance 4: the streamed-message group (nearly every commit while agents
/// stream) leaves the board cards' version alone, so a kept `task.list` answer stays kept;
/// a task write, a transaction of any other statement and even a failed-then-committed one
/// bump it (`Store::cards_version`).
#[tokio::test]
async fn i15_a4_only_writes_that_may_change_a_card_bump_the_cards_version() {
    let f = fixture("cards").await;
    let before = f.store.cards_version();
    let id = f.store.new_message_id();
    let mut tx = f.store.begin_write().await.unwrap();
    let (heads, first_seq) = tx.stream_heads_and_next_seq(&[]).await.unwrap();
    assert!(heads.is_empty());
    let new = streamed(&f.session, "streamed", MessageKind::Agent);
    let messages = [(id.clone(), first_seq, new)];
    let topic = format!("session:{}", f.session);
    tx.write_stream_group(kandev_store::StreamGroup {
        messages: &messages,
        chunks: &[],
        first_seq,
        events: vec![(topic, "session.message.added".into(), serde_json::json!({}).into())],
        fold_sessions: &[&f.session],
        keep: &[],
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(f.store.get_message(&id).await.unwrap().content, "streamed");
    assert_eq!(f.store.cards_version(), before, "a streamed group changes no card");

    // A read-only transaction changes nothing either.
    let mut tx = f.store.begin_write().await.unwrap();
    tx.permissions_waiting(&f.session).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(f.store.cards_version(), before);

    // A message written another way is not on the list: it counts as a change.
    new_message(&f.store, &f.session, "other").await;
    let after_message = f.store.cards_version();
    assert!(after_message > before);

    // A rolled-back transaction changes nothing.
    let mut tx = f.store.begin_write().await.unwrap();
    tx.fold_all_messages().await.unwrap();
    drop(tx);
    assert_eq!(f.store.cards_version(), after_message);
}

on_both_engines! {
async fn i53_a_long_message_s_snippet_shows_its_match(db: TestDb) {
    let f = fixture_on(db, "long").await;
    // Past the length PostgreSQL makes a snippet of whole (search.rs, SNIPPET_WHOLE_BYTES).
    let filler = "lorem ipsum dolor ".repeat(1000);
    let text = format!("{filler}the zanzibar treaty {filler}");
    new_message(&f.store, &f.session, &text).await;
    new_message(&f.store, &f.session, "the next message ends the first one's stream").await;
    let kinds = SearchKinds { tasks: false, messages: true };
    for query in ["zanzibar", "\"Zanzibar treaty\"", "zanzi*", "treaty NOT nothing"] {
        let page = f.store.search(&f.workspace, query, kinds, 10, 0).await.unwrap();
        assert_eq!(page.hits.len(), 1, "{query}: {page:?}");
        let snippet = &page.hits[0].snippet;
        let highlighted: Vec<String> =
            snippet.iter().filter(|p| p.highlight).map(|p| p.text.to_lowercase()).collect();
        assert!(
            highlighted.iter().any(|w| w.contains("zanzibar") || w.contains("treaty")),
            "{query}: {snippet:?}"
        );
        let whole: usize = snippet.iter().map(|p| p.text.len()).sum();
        assert!(whole < 400, "{query}: a snippet, not the text: {whole} bytes");
    }
}

/// The window of a long text is found where its match is written in another case than the
/// query's too (PostgreSQL looks for the match as the query writes it first).
async fn i53_a_long_message_s_snippet_shows_its_match_in_any_case(db: TestDb) {
    let f = fixture_on(db, "long").await;
    let filler = "lorem ipsum dolor ".repeat(1000);
    let text = format!("{filler}The ZANZIBAR Treaty {filler}");
    new_message(&f.store, &f.session, &text).await;
    new_message(&f.store, &f.session, "the next message ends the first one's stream").await;
    let kinds = SearchKinds { tasks: false, messages: true };
    for query in ["zanzibar", "\"zanzibar treaty\""] {
        let page = f.store.search(&f.workspace, query, kinds, 10, 0).await.unwrap();
        assert_eq!(page.hits.len(), 1, "{query}: {page:?}");
        let snippet = &page.hits[0].snippet;
        let highlighted: Vec<&str> =
            snippet.iter().filter(|p| p.highlight).map(|p| p.text.as_str()).collect();
        assert!(highlighted.iter().any(|h| h.contains("ZANZIBAR")), "{query}: {snippet:?}");
        let whole: usize = snippet.iter().map(|p| p.text.len()).sum();
        assert!(whole < 400, "{query}: a snippet, not the text: {whole} bytes");
    }
}
}

on_both_engines! {
/// Issue 53: a group's writes in the fewest statements each engine takes (on PostgreSQL its
/// inserts in one and its fold in another): a chunk of a message started in the same group,
/// and the fold of a message whose last chunk the group itself adds.
async fn i53_a_group_starts_appends_and_folds_in_its_own_statements(db: TestDb) {
    let f = fixture_on(db, "group").await;
    let first = new_message(&f.store, &f.session, "a").await;
    let second = f.store.new_message_id();
    let mut tx = f.store.begin_write().await.unwrap();
    let (heads, seq) = tx.stream_heads_and_next_seq(&[&first]).await.unwrap();
    assert_eq!(heads[&first].length, 1);
    let new = streamed(&f.session, "c", MessageKind::Thought);
    let messages = [(second.clone(), seq + 1, new)];
    let chunk = |message_id, delta, end_len| kandev_store::NewChunk {
        message_id,
        session_id: &f.session,
        delta,
        end_len,
    };
    let chunks = [chunk(&first, "b", 2), chunk(&second, "d", 2)];
    let topic = format!("session:{}", f.session);
    let event = |action: &str| (topic.clone(), action.to_owned(), serde_json::json!({}).into());
    let events = vec![
        event("session.message.updated"),
        event("session.message.added"),
        event("session.message.updated"),
    ];
    tx.write_stream_group(kandev_store::StreamGroup {
        messages: &messages,
        chunks: &chunks,
        first_seq: seq,
        events,
        fold_sessions: &[&f.session],
        keep: &[&second],
    })
    .await
    .unwrap();
    let (heads, next) = tx.stream_heads_and_next_seq(&[&first, &second]).await.unwrap();
    assert_eq!((heads[&first].length, heads[&second].length), (2, 2));
    assert_eq!(next, seq + 3, "the batch's seqs are the highest");
    tx.commit().await.unwrap();
    assert_eq!(f.store.get_message(&first).await.unwrap().content, "ab", "folded");
    assert_eq!(f.store.get_message(&second).await.unwrap().content, "cd", "still streaming");
    // An event numbered by the engine comes after the batch.
    let third = new_message(&f.store, &f.session, "e").await;
    assert_eq!(f.store.get_message(&third).await.unwrap().seq, seq + 3);
}
}

/// Issue 53: on PostgreSQL a statement inserting events with their seqs given raises the
/// highest seq once (migrations-pg/0049), not once per row: each per-row update made a new
/// version of `event_seq`'s one row for every later one to walk (a batch of 2,000: 41 ms
/// against 3). Counted by PostgreSQL itself, within the transaction.
#[tokio::test]
async fn i53_a_numbered_batch_of_events_raises_the_highest_seq_once() {
    use sqlx::{Connection, Row};
    let Some(db) = common::TestDb::postgres().await else { return };
    let kandev_store::Location::Postgres(url) = &db.location else { unreachable!() };
    drop(db.open().await); // migrated
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let updates = |row: sqlx::postgres::PgRow| row.get::<i64, _>(0);
    let count = "SELECT COALESCE(SUM(n_tup_upd), 0)::BIGINT FROM pg_stat_xact_user_tables \
                 WHERE relname = 'event_seq'";
    sqlx::query(
        "INSERT INTO events (seq, topic, action, payload, created_at) \
         SELECT g, 'session:s', 'session.message.updated', '{}', 0 FROM generate_series(1, 200) g",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    let after_batch = updates(sqlx::query(count).fetch_one(&mut *tx).await.unwrap());
    assert_eq!(after_batch, 1, "one update of the highest seq for a batch of 200");
    let last: i64 =
        sqlx::query_scalar("SELECT last FROM event_seq").fetch_one(&mut *tx).await.unwrap();
    assert_eq!(last, 200);
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO events (topic, action, payload, created_at) \
         VALUES ('session:s', 'session.message.added', '{}', 0) RETURNING seq",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(next, 201, "an event without a seq is numbered after the batch");
    let after_one = updates(sqlx::query(count).fetch_one(&mut *tx).await.unwrap());
    assert_eq!(after_one, 2, "and raises it once, not twice");
    tx.rollback().await.unwrap();
}

on_both_engines! {
/// Issue 53: after a burst of messages the searched tables are analyzed at once, not a
/// minute later by autovacuum: without statistics PostgreSQL planned a word in half of a
/// million messages as a rare one (420 ms instead of 2 ms, P6). Nothing to do on SQLite.
async fn i53_a_burst_of_messages_gets_the_planner_s_statistics_at_once(db: TestDb) {
    let postgres = db.is_postgres();
    let f = fixture_on(db, "burst").await;
    let mut tx = f.store.begin_write().await.unwrap();
    let (_, seq) = tx.stream_heads_and_next_seq(&[]).await.unwrap();
    let messages: Vec<_> = (0..1200)
        .map(|i| {
            let new = streamed(&f.session, &format!("answer {i}"), MessageKind::Agent);
            (f.store.new_message_id(), seq + i, new)
        })
        .collect();
    tx.write_stream_group(kandev_store::StreamGroup {
        messages: &messages,
        chunks: &[],
        first_seq: seq,
        events: vec![],
        fold_sessions: &[],
        keep: &[],
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    if !postgres {
        assert!(f.store.refresh_statistics().await.unwrap().is_empty());
        return;
    }
    // PostgreSQL counts the writes once the writing connection reports them (within ~10 s
    // of going idle).
    let analyzed = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let analyzed = f.store.refresh_statistics().await.unwrap();
            if !analyzed.is_empty() {
                return analyzed;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("the messages were analyzed within 30 s");
    assert_eq!(analyzed, ["messages"]);
    assert!(f.store.refresh_statistics().await.unwrap().is_empty(), "nothing new since");
}
}
