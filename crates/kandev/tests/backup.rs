//! Issue 43, acceptance 3: `kandev backup` while a turn streams, then `kandev restore` into a
//! new home (and an empty PostgreSQL database), shows the same tasks, transcript, queue and
//! attachments; a damaged archive is refused and changes nothing.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use support::{KANDEV, Server, call, eventually, launched_session, messages, turn_done};

mod support;

/// A fresh PostgreSQL database, or `None` when the run opted out of PostgreSQL
/// (`KANDEV_TEST_NO_PG=1`: the test then runs on SQLite); neither set fails, saying what to do.
async fn pg_database(what: &str) -> Option<String> {
    match std::env::var("KANDEV_TEST_PG_URL") {
        Ok(admin) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let name = format!("kandev_{what}_{}_{nanos}", std::process::id());
            Some(kandev_store::create_postgres_database(&admin, &name).await.unwrap())
        }
        Err(_) => {
            assert!(
                std::env::var_os("KANDEV_TEST_NO_PG").is_some(),
                "this test needs PostgreSQL: run ./scripts/test (it starts one), or eval \
                 \"$(./scripts/pg start)\" first, or set KANDEV_TEST_NO_PG=1 to test SQLite only"
            );
            eprintln!("KANDEV_TEST_NO_PG is set: the PostgreSQL half runs on SQLite");
            None
        }
    }
}

fn kandev(args: &[&str]) -> Output {
    KANDEV.command().args(args).env_remove("KANDEV_HOME").output().unwrap()
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// What a client sees of the board, the session's finished turns, its queue.
async fn seen(server: &Server, session: &str, turns: usize) -> Value {
    let got = call(server, "session.get", json!({"id": session})).await;
    let task = got["session"]["task_id"].clone();
    let task = call(server, "task.get", json!({"id": task})).await;
    let listed = call(server, "session.turn.list", json!({"session_id": session})).await;
    let finished: Vec<Value> =
        listed["turns"].as_array().unwrap()[..turns].iter().map(|t| t["id"].clone()).collect();
    let transcript: Vec<Value> = messages(server, session)
        .await
        .into_iter()
        .filter(|m| finished.contains(&m["turn_id"]))
        .map(|m| json!({"id": m["id"], "kind": m["kind"], "content": m["content"]}))
        .collect();
    let queue = call(server, "message.queue.list", json!({"session_id": session})).await;
    let queued: Vec<Value> =
        queue["queue"].as_array().unwrap().iter().map(|q| q["content"].clone()).collect();
    json!({"title": task["task"]["title"], "transcript": transcript, "queue": queued})
}

async fn round_trip(on_pg: bool) {
    let (source_db, restored_db) = if on_pg {
        (pg_database("backup_source").await, pg_database("backup_restored").await)
    } else {
        (None, None)
    };
    let home = tempfile::tempdir().unwrap();
    let mut serve_args: Vec<String> = vec![];
    if let Some(url) = &source_db {
        serve_args.extend(["--database-url".into(), url.clone()]);
    }
    let serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    let server = KANDEV.start_with(home.path(), &serve_args);
    let (_task, session) = launched_session(&server, "backed up").await;

    // A turn with an attachment, then a long streaming turn, and a prompt queued behind it.
    let bytes: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let uploaded = reqwest::Client::new()
        .post(format!("{}/api/v1/attachment.upload", server.url))
        .query(&[("name", "data.bin")])
        .header("content-type", "application/octet-stream")
        .header("x-kandev-upload", "1")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert!(uploaded.status().is_success(), "{}", uploaded.status());
    let attachment = uploaded.json::<Value>().await.unwrap()["attachment"].clone();
    let sent = json!({"session_id": session, "content": "#!mock\nsay first turn",
        "attachments": [attachment]});
    call(&server, "message.add", sent).await;
    turn_done(&server, &session, 1).await;
    let streaming = "#!mock\nstream 400 16 every 20";
    call(&server, "message.add", json!({"session_id": session, "content": streaming})).await;
    let queued = call(
        &server,
        "message.add",
        json!({"session_id": session, "content": "after the stream", "queue": true}),
    )
    .await;
    assert_eq!(queued["status"], "queued", "{queued}");
    eventually("the second turn streams", || async {
        let stored = messages(&server, &session).await;
        let agent = stored.iter().filter(|m| m["kind"] == "agent").count();
        (agent >= 2).then_some(())
    })
    .await;

    let archive = home.path().join("the-backup.tar.gz");
    let mut backup = vec!["backup", "--home", home.path().to_str().unwrap(), "--to"];
    backup.push(archive.to_str().unwrap());
    if let Some(url) = &source_db {
        backup.extend(["--database-url", url.as_str()]);
    }
    let out = kandev(&backup);
    assert!(out.status.success(), "backup: {}", said(&out));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&archive).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the archive holds the database: owner-only");
    assert_eq!(
        call(&server, "session.get", json!({"id": session})).await["session"]["state"],
        "RUNNING",
        "the backup was taken while the turn streamed"
    );
    let before = seen(&server, &session, 1).await;
    server.terminate();

    // Restored into a new home: the same board, transcript, queue and attachment.
    let restored = tempfile::tempdir().unwrap();
    let new_home = restored.path().join("home");
    let mut restore =
        vec!["restore", archive.to_str().unwrap(), "--home", new_home.to_str().unwrap()];
    if let Some(url) = &restored_db {
        restore.extend(["--database-url", url.as_str()]);
    }
    let out = kandev(&restore);
    assert!(out.status.success(), "restore: {}", said(&out));
    assert!(said(&out).contains("Start it with: kandev serve --home"), "{}", said(&out));
    let mode = std::fs::metadata(&new_home).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "a restored home is private from the start");
    let mut serve_args: Vec<String> = vec![];
    if let Some(url) = &restored_db {
        serve_args.extend(["--database-url".into(), url.clone()]);
    }
    let serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    let server = KANDEV.start_with(&new_home, &serve_args);
    let after = seen(&server, &session, 1).await;
    assert_eq!(after, before, "the restored server shows what the backup held");
    assert_eq!(after["queue"], json!(["after the stream"]));
    let id = attachment["id"].as_str().unwrap();
    assert_eq!(std::fs::read(new_home.join("attachments").join(id)).unwrap(), bytes);
    // The turn that streamed during the backup is there as far as it had come.
    let text: String = messages(&server, &session)
        .await
        .iter()
        .filter(|m| m["kind"] == "agent")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(text.contains("first turn"), "{text}");
    server.terminate();
}

#[tokio::test]
async fn i43_a3_backup_during_a_streaming_turn_restores_the_same_tasks_transcript_queue_and_attachments()
 {
    round_trip(false).await;
}

#[tokio::test]
async fn i43_a3_on_postgresql_backup_and_restore_into_an_empty_database() {
    round_trip(true).await;
}

/// A change made to an archive's bytes.
type Damage = Box<dyn FnOnce(&mut Vec<u8>)>;

fn damaged(archive: &Path, change: impl FnOnce(&mut Vec<u8>)) -> (Output, bool) {
    let mut bytes = std::fs::read(archive).unwrap();
    change(&mut bytes);
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.tar.gz");
    std::fs::write(&bad, bytes).unwrap();
    let home = dir.path().join("home");
    let out = kandev(&["restore", bad.to_str().unwrap(), "--home", home.to_str().unwrap()]);
    let leftovers = std::fs::read_dir(dir.path()).unwrap().count() > 1;
    (out, home.exists() || leftovers)
}

#[tokio::test]
async fn i43_a3_a_damaged_archive_is_refused_and_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    launched_session(&server, "kept").await;
    let archive = home.path().join("b.tar.gz");
    let out = kandev(&[
        "backup",
        "--home",
        home.path().to_str().unwrap(),
        "--to",
        archive.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", said(&out));
    server.terminate();

    let cases: Vec<(&str, Damage)> = vec![
        ("cut short", Box::new(|b: &mut Vec<u8>| b.truncate(b.len() / 2))),
        (
            "a flipped byte",
            Box::new(|b: &mut Vec<u8>| {
                let middle = b.len() / 2;
                b[middle] ^= 0x55;
            }),
        ),
        ("not an archive", Box::new(|b: &mut Vec<u8>| *b = b"hello".to_vec())),
    ];
    for (what, change) in cases {
        let (out, changed) = damaged(&archive, change);
        assert!(!out.status.success(), "{what}: restored");
        let text = said(&out);
        assert!(text.contains("nothing was restored"), "{what}: {text}");
        assert!(!changed, "{what}: something was written");
    }

    // Another program's .tar.gz is not a backup.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let foreign = dir.path().join("foreign.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&foreign)
        .arg("-C")
        .arg(dir.path())
        .arg("notes.txt")
        .status()
        .unwrap();
    assert!(status.success());
    let home = dir.path().join("home");
    let out = kandev(&["restore", foreign.to_str().unwrap(), "--home", home.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(said(&out).contains("is not a Kandev backup"), "{}", said(&out));
    assert!(!home.exists());

    // A file changed inside a well-formed archive: its checksum says so.
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let db = dir.path().join("kandev-backup/kandev.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&db, bytes).unwrap();
    let repacked = dir.path().join("repacked.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&repacked)
        .arg("-C")
        .arg(dir.path())
        .arg("kandev-backup")
        .status()
        .unwrap();
    assert!(status.success());
    let home = dir.path().join("home");
    let out = kandev(&["restore", repacked.to_str().unwrap(), "--home", home.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(said(&out).contains("kandev.db does not match its checksum"), "{}", said(&out));
    assert!(!home.exists());
}

#[tokio::test]
async fn i43_a3_an_upgrade_from_a_fixture_backs_up_the_earlier_database_first() {
    use kandev_store::{Dialect, Location, fixture, schema_state};
    let home = tempfile::tempdir().unwrap();
    let versions = fixture::versions(Dialect::Sqlite).await.unwrap();
    let (earlier, latest) = (versions[versions.len() - 2], *versions.last().unwrap());
    fixture::create(&Location::File(home.path().join("kandev.db")), earlier).await.unwrap();

    let server = KANDEV.start(home.path());
    let task = call(&server, "task.get", json!({"id": fixture::TASK_ID})).await;
    assert_eq!(task["task"]["title"], fixture::TASK_TITLE, "the upgraded database reads back");
    server.terminate();
    let backups: Vec<_> = std::fs::read_dir(home.path().join("backups"))
        .expect("a backups folder")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    let name = backups[0].file_name().unwrap().to_string_lossy().into_owned();
    let prefix = format!("kandev-before-upgrade-{earlier}-to-{latest}-");
    assert!(name.starts_with(&prefix) && name.ends_with(".tar.gz"), "{name}");

    // It holds the database as it was: the earlier schema.
    let unpacked = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&backups[0])
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(status.success());
    let kept = Location::File(unpacked.path().join("kandev-backup/kandev.db"));
    let state = schema_state(&kept).await.unwrap().unwrap();
    assert_eq!(state.applied, Some(earlier), "the backup is of the earlier schema");

    // A start with nothing to migrate makes no other backup.
    let server = KANDEV.start(home.path());
    server.terminate();
    assert_eq!(std::fs::read_dir(home.path().join("backups")).unwrap().count(), 1);
}
