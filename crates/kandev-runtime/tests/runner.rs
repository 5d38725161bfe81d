//! The runner (issue 20) with real agent processes: handshake and version check, replay of
//! unacknowledged output after a reconnect (exactly once), backpressure past the buffer
//! bound, the owner-gone grace period, and input exactly once across dropped connections
//! within a bound (defect 5).

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use kandev_runtime::runner::proto::{
    Data, FromRunner, PROTOCOL_VERSION, ProtocolError, RunnerCodec, ServerCodec, SpawnSpec,
    ToRunner,
};
use kandev_runtime::runner::{AckPolicy, Runner, RunnerClient, RunnerConfig};
use kandev_testkit::eventually_within;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::timeout;
use tokio_util::codec::Framed;

const WAIT: Duration = Duration::from_secs(10);

type Conn = Framed<DuplexStream, ServerCodec>;

fn sh(script: &str) -> SpawnSpec {
    SpawnSpec {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![],
        cwd: std::env::temp_dir(),
        secrets: vec![],
        pty: None,
        scrollback: 0,
    }
}

/// A raw owner connection to `runner` (the test decides what to acknowledge).
async fn connect(runner: &Runner) -> (Conn, Vec<kandev_runtime::runner::ExecutionInfo>) {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let runner = runner.clone();
    tokio::spawn(async move {
        let _ = runner.serve_connection(theirs).await;
    });
    let mut conn = Framed::new(ours, ServerCodec::default());
    conn.send(ToRunner::Hello { version: PROTOCOL_VERSION }).await.unwrap();
    match timeout(WAIT, conn.next()).await.unwrap() {
        Some(Ok(FromRunner::Welcome { version, executions })) => {
            assert_eq!(version, PROTOCOL_VERSION);
            (conn, executions)
        }
        other => panic!("expected welcome, got {other:?}"),
    }
}

async fn next(conn: &mut Conn) -> FromRunner {
    timeout(WAIT, conn.next()).await.expect("a frame in time").expect("open").expect("valid")
}

#[tokio::test]
async fn i20_s1_a_runner_refuses_a_server_of_another_version() {
    let runner = Runner::new(RunnerConfig::default());
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn({
        let runner = runner.clone();
        async move { runner.serve_connection(theirs).await }
    });
    let mut conn = Framed::new(ours, ServerCodec::default());
    conn.send(ToRunner::Hello { version: PROTOCOL_VERSION + 1 }).await.unwrap();
    match next(&mut conn).await {
        FromRunner::Refused { message } => {
            assert!(message.contains("protocol version"), "{message}");
            assert!(message.contains("same kandev version"), "{message}");
        }
        other => panic!("expected refused, got {other:?}"),
    }
    let err = serving.await.unwrap().unwrap_err();
    assert!(matches!(err, ProtocolError::VersionMismatch { .. }), "{err:?}");
}

#[tokio::test]
async fn i20_s1_a_server_refuses_a_runner_of_another_version() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let mut fake = Framed::new(theirs, RunnerCodec::default());
        let _hello = fake.next().await;
        let welcome = FromRunner::Welcome { version: PROTOCOL_VERSION + 1, executions: vec![] };
        fake.send(welcome).await.unwrap();
        // Held open until the client gives up.
        let _ = fake.next().await;
    });
    let err = RunnerClient::connect(ours).await.err().expect("refused");
    assert!(matches!(err, ProtocolError::VersionMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("stop the old runner"), "{err}");
}

#[tokio::test]
async fn i20_s1_a_bad_frame_ends_the_connection_with_a_clear_error() {
    let runner = Runner::new(RunnerConfig::default());
    let (mut ours, theirs) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn({
        let runner = runner.clone();
        async move { runner.serve_connection(theirs).await }
    });
    let body = b"not json";
    ours.write_all(&(body.len() as u32).to_be_bytes()).await.unwrap();
    ours.write_all(body).await.unwrap();
    let err = timeout(WAIT, serving).await.unwrap().unwrap().unwrap_err();
    assert!(err.to_string().starts_with("a runner frame is not valid"), "{err}");
}

/// Lines 0..n, as the agent below prints them.
fn expected_lines(n: usize) -> String {
    (0..n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn i20_s1_unacknowledged_output_is_replayed_exactly_once_after_a_reconnect() {
    let runner = Runner::new(RunnerConfig::default());
    let (mut conn, listed) = connect(&runner).await;
    assert!(listed.is_empty());
    let script = "read go; i=0; while [ $i -lt 2000 ]; do echo \"line $i\"; i=$((i+1)); done";
    conn.send(ToRunner::Spawn { exec: "x1".into(), spec: sh(script) }).await.unwrap();
    assert!(matches!(next(&mut conn).await, FromRunner::Spawned { .. }));
    let go = Data(Bytes::from_static(b"go\n"));
    conn.send(ToRunner::Input { exec: "x1".into(), seq: 1, data: go, keys: vec![] }).await.unwrap();
    assert_eq!(next(&mut conn).await, FromRunner::InputAck { exec: "x1".into(), seq: 1 });
    // Take the first chunk and acknowledge it; see a second one and do not.
    let mut kept = Vec::new();
    let acked = match next(&mut conn).await {
        FromRunner::Output { seq, data, .. } => {
            kept.extend_from_slice(&data.0);
            seq
        }
        other => panic!("expected output, got {other:?}"),
    };
    assert_eq!(acked, 1);
    conn.send(ToRunner::Ack { exec: "x1".into(), seq: acked }).await.unwrap();
    let seen_unacked = next(&mut conn).await;
    assert!(matches!(
        seen_unacked,
        FromRunner::Output { seq: 2, .. } | FromRunner::Exited { seq: 2, .. }
    ));
    drop(conn); // the server goes away

    let (mut conn, listed) = connect(&runner).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].exec, "x1");
    assert_eq!(listed[0].acked, acked);
    let mut expected_seq = acked + 1;
    let exit = loop {
        match next(&mut conn).await {
            FromRunner::Output { seq, data, .. } => {
                assert_eq!(seq, expected_seq, "replay starts right after the ack, in order");
                expected_seq += 1;
                kept.extend_from_slice(&data.0);
                conn.send(ToRunner::Ack { exec: "x1".into(), seq }).await.unwrap();
            }
            FromRunner::Exited { seq, exit, .. } => {
                assert_eq!(seq, expected_seq);
                conn.send(ToRunner::Ack { exec: "x1".into(), seq }).await.unwrap();
                break exit;
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(String::from_utf8(kept).unwrap(), expected_lines(2000), "every byte exactly once");
    assert_eq!(exit, kandev_runtime::runner::proto::ExitReport::Code(0));
    drop(conn);
    // The acknowledged exit was the last item: the runner holds nothing any more.
    let (_conn, listed) = connect(&runner).await;
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test]
async fn i20_s1_output_past_the_buffer_bound_waits_and_is_never_dropped() {
    const LIMIT: usize = 4096;
    const TOTAL: usize = 300_000;
    let runner = Runner::new(RunnerConfig { buffer_limit: LIMIT, ..RunnerConfig::default() });
    let (mut conn, _) = connect(&runner).await;
    let script = format!("head -c {TOTAL} /dev/zero | tr '\\0' a");
    conn.send(ToRunner::Spawn { exec: "big".into(), spec: sh(&script) }).await.unwrap();
    assert!(matches!(next(&mut conn).await, FromRunner::Spawned { .. }));
    // Without acknowledgements the runner reads up to the bound (one chunk may cross it)...
    let what = "the runner to read the agent's output up to the bound";
    eventually_within(WAIT, what, async || runner.buffered("big").unwrap() >= LIMIT).await;
    // ...and no further: the agent cannot finish.
    let mut unacked = Vec::new();
    let quiet = timeout(Duration::from_millis(500), async {
        loop {
            match next(&mut conn).await {
                FromRunner::Output { seq, data, .. } => unacked.push((seq, data.0)),
                other => return other,
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "the agent finished although nothing was acknowledged: {quiet:?}");
    let buffered = runner.buffered("big").unwrap();
    assert!((LIMIT..LIMIT + 64 * 1024).contains(&buffered), "buffered {buffered}");
    assert!(unacked.iter().map(|(_, d)| d.len()).sum::<usize>() < TOTAL);
    // Acknowledging lets it go on; everything arrives, in order, once.
    let mut received = 0;
    let mut seqs = Vec::new();
    for (seq, data) in &unacked {
        received += data.len();
        seqs.push(*seq);
        conn.send(ToRunner::Ack { exec: "big".into(), seq: *seq }).await.unwrap();
    }
    loop {
        match next(&mut conn).await {
            FromRunner::Output { seq, data, .. } => {
                assert!(data.0.iter().all(|b| *b == b'a'));
                received += data.0.len();
                seqs.push(seq);
                conn.send(ToRunner::Ack { exec: "big".into(), seq }).await.unwrap();
            }
            FromRunner::Exited { seq, .. } => {
                seqs.push(seq);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(received, TOTAL);
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected);
}

#[tokio::test]
async fn i20_a2_agents_are_killed_once_the_owner_is_gone_past_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("runner.sock");
    let grace = Duration::from_millis(400);
    let runner = Runner::new(RunnerConfig { grace, ..RunnerConfig::default() });
    let listener = kandev_runtime::runner::bind(&socket).await.unwrap();
    let serving = tokio::spawn(kandev_runtime::runner::serve_unix(listener, runner.clone()));

    let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let (client, listed) = RunnerClient::connect(stream).await.unwrap();
    assert!(listed.is_empty());
    let mut execution = client.spawn("a2", sh("echo ready; exec sleep 600")).await.unwrap();
    let pgid = execution.control.pid();
    let mut ready = [0u8; 6];
    timeout(WAIT, execution.stdout.read_exact(&mut ready)).await.unwrap().unwrap();
    assert_eq!(&ready, b"ready\n");
    // While the owner is connected, the grace period does not run.
    let held = timeout(grace * 3, execution.control.wait()).await;
    assert!(held.is_err(), "the agent ended while its owner was connected");
    assert!(kandev_runtime::group_alive(pgid));

    client.close();
    // Past the grace period the runner kills the agent's group and ends.
    timeout(WAIT, serving).await.expect("the runner ended").unwrap().unwrap();
    assert!(!kandev_runtime::group_alive(pgid), "the agent outlived its runner's grace period");
    assert!(!socket.exists(), "the socket file is removed");
}

#[tokio::test]
async fn i20_s1_an_execution_through_the_client_behaves_like_a_local_child() {
    let runner = Runner::new(RunnerConfig::default());
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn({
        let runner = runner.clone();
        async move { runner.serve_connection(theirs).await }
    });
    let (client, _) = RunnerClient::connect(ours).await.unwrap();
    let err = client.spawn("nope", SpawnSpec { program: "/no/such/agent".into(), ..sh("") }).await;
    assert!(err.err().unwrap().to_string().contains("was not found"));
    let mut execution = client.spawn("cat", sh("cat; echo bye >&2; exit 3")).await.unwrap();
    execution.stdin.write_all(b"ping\n").await.unwrap();
    let mut line = [0u8; 5];
    timeout(WAIT, execution.stdout.read_exact(&mut line)).await.unwrap().unwrap();
    assert_eq!(&line, b"ping\n");
    drop(execution.stdin); // EOF for cat
    let exit = timeout(WAIT, execution.control.wait()).await.unwrap();
    assert_eq!(exit, kandev_runtime::ExitInfo::Exited { code: 3 });
    assert!(execution.control.stderr_tail().contains("bye"));
    let mut rest = Vec::new();
    execution.stdout.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    // Stopping a running one reports its signal.
    let sleeper = client.spawn("sleep", sh("exec sleep 600")).await.unwrap();
    let exit = timeout(WAIT, sleeper.control.stop(Duration::from_millis(100))).await.unwrap();
    assert_eq!(exit, kandev_runtime::ExitInfo::Signaled { signal: 15 });
}

/// Reads `stdout` to its end (the runner's exit item closes it).
async fn read_to_end(stdout: &mut DuplexStream) -> Vec<u8> {
    let mut all = Vec::new();
    timeout(WAIT, stdout.read_to_end(&mut all)).await.expect("output in time").unwrap();
    all
}

#[tokio::test]
async fn i20_a1_l42_only_committed_output_is_acknowledged_so_a_new_server_gets_the_rest_once() {
    const LINES: usize = 40;
    let runner = Runner::new(RunnerConfig::default());
    let serve = |runner: &Runner| {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let runner = runner.clone();
        tokio::spawn(async move { runner.serve_connection(theirs).await });
        ours
    };
    let (client, _) = RunnerClient::connect(serve(&runner)).await.unwrap();
    // `cat` echoes each line once it is written: one item per line.
    let mut execution = client.spawn_with("c1", sh("exec cat"), AckPolicy::OnCommit).await.unwrap();
    let mut first = Vec::new();
    for line in expected_lines(LINES).lines() {
        execution.stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        let mut echo = vec![0u8; line.len() + 1];
        timeout(WAIT, execution.stdout.read_exact(&mut echo)).await.unwrap().unwrap();
        first.extend_from_slice(&echo);
    }
    drop(execution.stdin);
    // The first server reads everything but commits the effects of only the first half.
    first.extend(read_to_end(&mut execution.stdout).await);
    assert_eq!(String::from_utf8(first.clone()).unwrap(), expected_lines(LINES));
    let acks = &execution.acks;
    let exit_seq = acks.exit_seq().expect("the exit arrived");
    let (seq, end) = acks.seq_through(first.len() as u64 / 2).expect("an item in the first half");
    assert!(seq > 0 && seq < exit_seq && end <= first.len() as u64 / 2, "{seq} {end}");
    assert_eq!(acks.seq_through(0), None, "no item lies within nothing");
    acks.commit(seq);
    acks.commit(seq - 1); // an older commit changes nothing
    assert_eq!(acks.committed(), seq);
    client.close();
    let unacked = first.len() - usize::try_from(end).unwrap();
    let what = "the runner to take the acknowledgement sent before close";
    eventually_within(WAIT, what, async || runner.buffered("c1") == Some(unacked)).await;
    let (client, listed) = RunnerClient::connect(serve(&runner)).await.unwrap();
    assert_eq!(listed.len(), 1, "the exit was not committed: the runner keeps the execution");
    assert_eq!(listed[0].acked, seq, "the runner counts what was committed, not what was read");
    // This server dies (kill -9) having committed the effects of one more item, whose
    // acknowledgement never reached the runner: its own record says where to go on.
    let mut execution = client.attach_with(&listed[0], AckPolicy::OnCommit, 0);
    let replayed = read_to_end(&mut execution.stdout).await;
    assert_eq!(&first[usize::try_from(end).unwrap()..], &replayed[..]);
    let (seq, more) = execution.acks.seq_through(replayed.len() as u64 / 2).unwrap();
    let end = end + more;
    drop(execution);
    client.close();
    let (client, listed) = RunnerClient::connect(serve(&runner)).await.unwrap();
    assert!(listed[0].acked < seq, "nothing more was acknowledged");
    let mut adopted = client.attach_with(&listed[0], AckPolicy::OnCommit, seq);
    let rest = read_to_end(&mut adopted.stdout).await;
    let end = usize::try_from(end).unwrap();
    assert_eq!(&first[end..], &rest[..], "the replay starts right after the committed item");
    let mut once = first[..end].to_vec();
    once.extend_from_slice(&rest);
    assert_eq!(String::from_utf8(once).unwrap(), expected_lines(LINES), "every byte exactly once");
    assert_eq!(adopted.acks.exit_seq(), Some(exit_seq));
    adopted.acks.commit(exit_seq);
    client.close();
    // The committed exit was the last item: the runner forgets the execution.
    let what = "the runner to forget a committed exit";
    eventually_within(WAIT, what, async || runner.buffered("c1").is_none()).await;
    let (_client, listed) = RunnerClient::connect(serve(&runner)).await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test]
async fn i20_d1_the_runner_socket_is_owner_only_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("runner.sock");
    let _listener = kandev_runtime::runner::bind(&socket).await.unwrap();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the runner socket is {mode:o}, not owner-only");
}

#[tokio::test]
async fn i20_d1_input_to_an_agent_that_does_not_read_it_is_bounded_with_a_clear_error() {
    // A server that does not wait for `input_ack`: past the bound the runner stops
    // acknowledging, past four times the bound it refuses with an error.
    const LIMIT: usize = 64 * 1024;
    let runner = Runner::new(RunnerConfig { input_limit: LIMIT, ..RunnerConfig::default() });
    let (mut conn, _) = connect(&runner).await;
    conn.send(ToRunner::Spawn { exec: "deaf".into(), spec: sh("exec sleep 600") }).await.unwrap();
    assert!(matches!(next(&mut conn).await, FromRunner::Spawned { .. }));
    let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
    // The agent's pipe takes some (the kernel's buffer), the queue the rest.
    let frames = (1 << 20) / chunk.len() as u64;
    let sending = tokio::spawn(async move {
        for seq in 1..=frames {
            let frame = ToRunner::Input {
                exec: "deaf".into(),
                seq,
                data: Data(chunk.clone()),
                keys: vec![],
            };
            conn.send(frame).await.unwrap();
        }
        conn
    });
    let mut conn = timeout(WAIT, sending).await.expect("the runner reads input").unwrap();
    let mut acked = 0;
    let message = loop {
        match next(&mut conn).await {
            FromRunner::InputAck { seq, .. } => {
                assert!(seq > acked, "acknowledgements go up");
                acked = seq;
            }
            FromRunner::Error { message } => break message,
            other => panic!("expected an input_ack or an error, got {other:?}"),
        }
    };
    assert!(message.contains("stdin") && message.contains("input_ack"), "{message}");
    let (taken, last_acked) = runner.input_numbers("deaf").unwrap();
    assert!(taken < frames, "everything was taken: {taken}");
    assert!(last_acked < taken, "taken past the bound but acknowledged: {last_acked} {taken}");
    let queued = runner.queued_input("deaf").unwrap();
    assert!(queued <= 4 * LIMIT, "the stdin queue holds {queued} bytes");
}

#[tokio::test]
async fn i20_d1_a_server_connecting_while_the_runner_kills_its_agents_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("term");
    let runner =
        Runner::new(RunnerConfig { grace: Duration::from_millis(50), ..RunnerConfig::default() });
    let (mut conn, _) = connect(&runner).await;
    // The agent survives TERM (it marks it), so the runner stays in its KILL_GRACE stop.
    let script = format!(
        "trap 'echo term > {}' TERM; echo ready; while :; do sleep 0.05; done",
        mark.display()
    );
    conn.send(ToRunner::Spawn { exec: "late".into(), spec: sh(&script) }).await.unwrap();
    assert!(matches!(next(&mut conn).await, FromRunner::Spawned { .. }));
    assert!(matches!(next(&mut conn).await, FromRunner::Output { .. }));
    drop(conn);
    // The agent's TERM mark is a file: nothing announces it.
    let what = "the runner to stop its agent past the grace period";
    eventually_within(WAIT, what, async || mark.exists()).await;

    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn({
        let runner = runner.clone();
        async move { runner.serve_connection(theirs).await }
    });
    let mut late = Framed::new(ours, ServerCodec::default());
    late.send(ToRunner::Hello { version: PROTOCOL_VERSION }).await.unwrap();
    match next(&mut late).await {
        FromRunner::Refused { message } => assert!(message.contains("ending"), "{message}"),
        other => panic!("a server got {other:?} from a runner that is killing its agents"),
    }
    assert!(matches!(serving.await.unwrap(), Err(ProtocolError::Refused(_))));
    timeout(WAIT, runner.done().cancelled()).await.expect("the runner ends");
}

#[tokio::test]
async fn i20_d1_the_replay_of_a_forgotten_execution_is_discarded_not_parked_for_ever() {
    // The test plays the runner, so the replay arrives after `forget` every time.
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let mut runner = Framed::new(theirs, RunnerCodec::default());
    let playing = tokio::spawn(async move {
        assert!(matches!(runner.next().await, Some(Ok(ToRunner::Hello { .. }))));
        let old = kandev_runtime::runner::ExecutionInfo {
            exec: "old".into(),
            pid: 1,
            acked: 0,
            exited: false,
            input_taken: 0,
            input_acked: 0,
            keys: vec![],
        };
        let welcome = FromRunner::Welcome { version: PROTOCOL_VERSION, executions: vec![old] };
        runner.send(welcome).await.unwrap();
        match runner.next().await {
            Some(Ok(ToRunner::Forget { exec })) => assert_eq!(exec, "old"),
            other => panic!("expected forget, got {other:?}"),
        }
        for seq in 1..=3 {
            let data = Data(Bytes::from_static(b"late\n"));
            runner.send(FromRunner::Output { exec: "old".into(), seq, data }).await.unwrap();
        }
        match runner.next().await {
            Some(Ok(ToRunner::Spawn { exec, .. })) => {
                runner.send(FromRunner::Spawned { exec, pid: 2 }).await.unwrap();
            }
            other => panic!("expected spawn, got {other:?}"),
        }
        runner
    });
    let (client, listed) = RunnerClient::connect(ours).await.unwrap();
    assert_eq!(listed.len(), 1);
    client.forget("old");
    // Frames are routed in order: once the probe's `spawned` is in, the replay was handled.
    let _probe = timeout(WAIT, client.spawn("probe", sh("true"))).await.unwrap().unwrap();
    assert_eq!(client.parked(), 0, "the replay of a forgotten execution is kept for ever");
    let _runner = playing.await.unwrap();
}

/// A connection to `runner` through a relay the test can freeze per direction (bytes stop
/// going through and are lost with the relay) and cut (both sides see the connection end).
struct Relay {
    up: tokio::task::JoinHandle<()>,
    down: tokio::task::JoinHandle<()>,
}

impl Relay {
    fn start(runner: &Runner) -> (Relay, DuplexStream) {
        let (client_side, relay_near) = tokio::io::duplex(1 << 16);
        let (relay_far, runner_side) = tokio::io::duplex(1 << 16);
        let runner = runner.clone();
        tokio::spawn(async move { runner.serve_connection(runner_side).await });
        let (mut near_read, mut near_write) = tokio::io::split(relay_near);
        let (mut far_read, mut far_write) = tokio::io::split(relay_far);
        let up = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut near_read, &mut far_write).await;
        });
        let down = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut far_read, &mut near_write).await;
        });
        (Relay { up, down }, client_side)
    }

    /// Server → runner bytes stop here from now on.
    fn freeze_up(&self) {
        self.up.abort();
    }

    /// Runner → server bytes stop here from now on.
    fn freeze_down(&self) {
        self.down.abort();
    }

    /// The connection ends for both sides.
    async fn cut(self) {
        self.up.abort();
        self.down.abort();
        let _ = self.up.await;
        let _ = self.down.await;
    }
}

#[tokio::test]
async fn i20_d5_a_resent_input_item_is_taken_once() {
    let runner = Runner::new(RunnerConfig::default());
    let (mut conn, _) = connect(&runner).await;
    conn.send(ToRunner::Spawn { exec: "cat".into(), spec: sh("exec cat") }).await.unwrap();
    assert!(matches!(next(&mut conn).await, FromRunner::Spawned { .. }));
    let item = |seq: u64, text: &'static str| ToRunner::Input {
        exec: "cat".into(),
        seq,
        data: Data(Bytes::from_static(text.as_bytes())),
        keys: vec![],
    };
    async fn echo(conn: &mut Conn) -> (u64, Bytes) {
        loop {
            match next(conn).await {
                FromRunner::Output { seq, data, .. } => return (seq, data.0),
                FromRunner::InputAck { .. } => {}
                other => panic!("expected output, got {other:?}"),
            }
        }
    }
    conn.send(item(1, "one\n")).await.unwrap();
    assert_eq!(next(&mut conn).await, FromRunner::InputAck { exec: "cat".into(), seq: 1 });
    let (seq, data) = echo(&mut conn).await;
    assert_eq!(&data[..], b"one\n");
    conn.send(ToRunner::Ack { exec: "cat".into(), seq }).await.unwrap();
    // Item 1 again (a resend after a drop) and then item 2: only item 2 reaches the agent.
    conn.send(item(1, "one\n")).await.unwrap();
    conn.send(item(2, "two\n")).await.unwrap();
    let (seq, data) = echo(&mut conn).await;
    assert_eq!(&data[..], b"two\n", "a resent item was written to the agent again");
    conn.send(ToRunner::Ack { exec: "cat".into(), seq }).await.unwrap();
    drop(conn);

    // A new connection learns what was taken; resends of it change nothing.
    let (mut conn, listed) = connect(&runner).await;
    assert_eq!((listed[0].input_taken, listed[0].input_acked), (2, 2));
    conn.send(item(2, "two\n")).await.unwrap();
    conn.send(item(3, "three\n")).await.unwrap();
    let (_, data) = echo(&mut conn).await;
    assert_eq!(&data[..], b"three\n");
    // A gap (item 5 after 3) is refused with what to send instead; the close is an item too.
    conn.send(item(5, "five\n")).await.unwrap();
    match next(&mut conn).await {
        FromRunner::Error { message } => {
            assert!(message.contains("does not follow item 3"), "{message}");
        }
        other => panic!("expected an error for a gap, got {other:?}"),
    }
    conn.send(ToRunner::CloseInput { exec: "cat".into(), seq: 4 }).await.unwrap();
    loop {
        match next(&mut conn).await {
            FromRunner::Exited { exit, .. } => {
                assert_eq!(exit, kandev_runtime::runner::proto::ExitReport::Code(0));
                break;
            }
            FromRunner::InputAck { .. } => {}
            other => panic!("expected the exit after the close, got {other:?}"),
        }
    }
    assert_eq!(runner.input_numbers("cat"), Some((4, 4)));
}

#[tokio::test]
async fn i20_d5_input_lost_with_a_dropped_connection_reaches_the_agent_exactly_once() {
    let runner = Runner::new(RunnerConfig::default());
    let (relay, stream) = Relay::start(&runner);
    let (client, _) = RunnerClient::connect(stream).await.unwrap();
    let execution = client.spawn_with("cat", sh("exec cat"), AckPolicy::OnDelivery).await.unwrap();
    let (mut stdin, mut stdout, control) = (execution.stdin, execution.stdout, execution.control);
    let acks = execution.acks;
    let mut seen = Vec::new();
    stdin.write_all(b"one\n").await.unwrap();
    let mut echo = [0u8; 4];
    timeout(WAIT, stdout.read_exact(&mut echo)).await.unwrap().unwrap();
    seen.extend_from_slice(&echo);
    let inputs = control.inputs().clone();
    eventually_within(WAIT, "the runner acknowledges item 1", async || {
        inputs.unacknowledged() == 0
    })
    .await;

    // Sent into a connection that drops before the runner reads it.
    relay.freeze_up();
    stdin.write_all(b"two\n").await.unwrap();
    stdin.write_all(b"three\n").await.unwrap();
    eventually_within(WAIT, "the input is sent", async || inputs.unacknowledged() == 10).await;
    relay.cut().await;
    timeout(WAIT, client.closed()).await.expect("the client sees the drop");
    assert_eq!(runner.input_numbers("cat"), Some((1, 1)), "nothing of it reached the runner");

    // A new connection: the queue goes on there and resends what the runner did not take.
    let (relay, stream) = Relay::start(&runner);
    let (client, listed) = RunnerClient::connect(stream).await.unwrap();
    // `one` was delivered (OnDelivery) and so acknowledged.
    let resumed = client.resume(&listed[0], AckPolicy::OnDelivery, acks.committed(), &inputs);
    drop(control); // the queue lives on in the new control
    let (mut stdout, control, acks) = (resumed.stdout, resumed.control, resumed.acks);
    let mut echo = vec![0u8; 10];
    timeout(WAIT, stdout.read_exact(&mut echo)).await.unwrap().unwrap();
    seen.extend_from_slice(&echo);
    // Written on the same stdin after the drop: after the resent items.
    stdin.write_all(b"four\n").await.unwrap();
    let mut echo = vec![0u8; 5];
    timeout(WAIT, stdout.read_exact(&mut echo)).await.unwrap().unwrap();
    seen.extend_from_slice(&echo);
    eventually_within(WAIT, "the runner acknowledges `four`", async || {
        inputs.unacknowledged() == 0
    })
    .await;

    // Taken by the runner, but its acknowledgement (and the echo) lost with the connection:
    // not sent again.
    relay.freeze_down();
    stdin.write_all(b"five\n").await.unwrap();
    // (Items are chunks of what was written: count them rather than assume.)
    let last = |runner: &Runner| runner.input_numbers("cat").map(|(taken, _)| taken);
    eventually_within(WAIT, "the runner takes `five`", async || {
        inputs.unacknowledged() == 5 && last(&runner) == Some(inputs.last())
    })
    .await;
    let five = inputs.last();
    assert_eq!(inputs.unacknowledged(), 5, "the acknowledgement did not arrive");
    relay.cut().await;
    timeout(WAIT, client.closed()).await.expect("the client sees the drop");
    let (_relay, stream) = Relay::start(&runner);
    let (client, listed) = RunnerClient::connect(stream).await.unwrap();
    assert_eq!((listed[0].input_taken, listed[0].input_acked), (five, five));
    let resumed = client.resume(&listed[0], AckPolicy::OnDelivery, acks.committed(), &inputs);
    drop(control);
    assert_eq!(inputs.unacknowledged(), 0, "the welcome acknowledged `five`");
    let mut stdout = resumed.stdout;
    drop(stdin); // the close, as item 6
    seen.extend(read_to_end(&mut stdout).await);
    assert_eq!(String::from_utf8(seen).unwrap(), "one\ntwo\nthree\nfour\nfive\n", "exactly once");
    let exit = timeout(WAIT, resumed.control.wait()).await.unwrap();
    assert_eq!(exit, kandev_runtime::ExitInfo::Exited { code: 0 });
    assert_eq!(inputs.last(), five + 1, "the close was the last item");
    eventually_within(WAIT, "the acknowledged exit ends the execution", async || {
        runner.input_numbers("cat").is_none()
    })
    .await;
}

#[tokio::test]
async fn i20_d5_unacknowledged_input_is_bounded_and_the_writer_waits() {
    const LIMIT: usize = 32 * 1024;
    const TOTAL: usize = 3 << 20;
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let config = RunnerConfig { input_limit: LIMIT, ..RunnerConfig::default() };
    let runner = Runner::new(config);
    let (_relay, stream) = Relay::start(&runner);
    let (client, _) = RunnerClient::connect(stream).await.unwrap();
    let client = client.with_input_limit(LIMIT);
    // The agent reads nothing until told to, then counts what it gets.
    let script = format!("while [ ! -e {} ]; do sleep 0.02; done; exec wc -c", go.display());
    let execution = client.spawn_with("deaf", sh(&script), AckPolicy::OnDelivery).await.unwrap();
    let inputs = execution.control.inputs().clone();
    let mut stdin = execution.stdin;
    let mut writing = tokio::spawn(async move {
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..TOTAL / chunk.len() {
            stdin.write_all(&chunk).await.unwrap();
        }
        stdin // kept open: the close follows below
    });
    // The writer waits: the agent's pipe, the runner's queue and the client's bound fill up.
    let waits = timeout(Duration::from_millis(500), &mut writing).await;
    assert!(waits.is_err(), "3 MiB went into an agent that reads nothing");
    let unacked = inputs.unacknowledged();
    assert!(unacked <= 64 * 1024, "the client holds {unacked} unacknowledged bytes");
    let queued = runner.queued_input("deaf").unwrap();
    assert!(queued <= LIMIT + 64 * 1024, "the runner queues {queued} bytes");
    // Once the agent reads, everything arrives, once.
    std::fs::write(&go, b"").unwrap();
    let stdin = timeout(WAIT, writing).await.expect("the writer goes on").unwrap();
    drop(stdin);
    let mut stdout = execution.stdout;
    let count = String::from_utf8(read_to_end(&mut stdout).await).unwrap();
    assert_eq!(count.trim(), TOTAL.to_string());
}

/// Issue 38 item 12 (protocol version 3): lines a server names are listed in `welcome` once
/// the runner took the item they end in, so a server that restarts knows which of its
/// committed inputs reached the agent; a named line never written is not listed.
#[tokio::test]
async fn i38_12_the_keys_of_taken_input_are_listed_to_the_next_connection() {
    use tokio::io::AsyncWriteExt;
    let runner = Runner::new(RunnerConfig::default());
    let (client, _) = RunnerClient::connect(runner_stream(&runner)).await.unwrap();
    let execution = client.spawn_with("cat", sh("exec cat"), AckPolicy::OnDelivery).await.unwrap();
    let (mut stdin, mut stdout, keys) = (execution.stdin, execution.stdout, execution.keys);
    let mut written = 0u64;
    for (line, key) in [("one\n", "prompt:1"), ("two\n", "answer:2")] {
        written += line.len() as u64;
        keys.send((written, key.to_owned())).unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
    }
    stdin.write_all(b"three\n").await.unwrap(); // not named
    let mut echoed = Vec::new();
    while echoed.len() < b"one\ntwo\nthree\n".len() {
        let mut chunk = [0u8; 64];
        let n = timeout(WAIT, tokio::io::AsyncReadExt::read(&mut stdout, &mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the agent's output ended");
        echoed.extend_from_slice(&chunk[..n]);
    }
    // Named, never written (a server that died between its commit and the write).
    keys.send((written + 100, "cancel:3".into())).unwrap();
    client.finish().await;

    let (_conn, listed) = connect(&runner).await;
    assert_eq!(listed[0].keys, ["prompt:1", "answer:2"], "taken keys, in order");
    drop(execution.control);
    runner.shutdown().await;
}

/// A connection to `runner` over an in-process pipe.
fn runner_stream(runner: &Runner) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let runner = runner.clone();
    tokio::spawn(async move { runner.serve_connection(theirs).await });
    ours
}

/// Reads a shell's output until `expected` is in it.
async fn read_until(shell: &kandev_runtime::pty::PtyShell, expected: &str) -> String {
    let mut changes = shell.changes();
    let mut seen = String::new();
    let mut offset = 0;
    let found = timeout(WAIT, async {
        loop {
            changes.borrow_and_update();
            let chunk = shell.read_since(offset);
            offset = chunk.next;
            seen.push_str(&String::from_utf8_lossy(&chunk.data));
            if seen.contains(expected) {
                return;
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(found.is_ok() && seen.contains(expected), "{expected:?} not in {seen:?}");
    seen
}

#[tokio::test]
async fn i45_13_a_terminal_on_the_runner_resizes_and_a_new_server_gets_its_scrollback_then_goes_on_live()
 {
    let runner = Runner::new(RunnerConfig::default());
    let (client, _) = RunnerClient::connect(runner_stream(&runner)).await.unwrap();
    let spec = SpawnSpec {
        program: "/bin/sh".into(),
        args: vec![],
        pty: Some(kandev_runtime::runner::proto::PtySize { cols: 80, rows: 24 }),
        scrollback: 64 * 1024,
        ..sh("")
    };
    let execution = client.spawn("term_1", spec).await.unwrap();
    let shell = kandev_runtime::pty::through_runner(execution);
    shell.write(b"echo before-$((6*7))\n".to_vec()).await.unwrap();
    read_until(&shell, "before-42").await;
    shell.resize(100, 30).await.unwrap();
    shell.write(b"stty size\n".to_vec()).await.unwrap();
    read_until(&shell, "30 100").await;
    // The server goes away (kill -9: nothing is closed for it); the shell runs on.
    client.drop_transport();
    drop(shell);
    drop(client);
    let (client, listed) = RunnerClient::connect(runner_stream(&runner)).await.unwrap();
    let info = listed.iter().find(|e| e.exec == "term_1").expect("the runner kept the terminal");
    assert!(!info.exited);
    let shell = kandev_runtime::pty::through_runner(client.attach(info));
    let replayed = read_until(&shell, "30 100").await;
    assert_eq!(replayed.matches("before-42").count(), 1, "the scrollback once: {replayed:?}");
    shell.write(b"echo after-$((6*7))\n".to_vec()).await.unwrap();
    read_until(&shell, "after-42").await;
    shell.write(b"exit 5\n".to_vec()).await.unwrap();
    let mut changes = shell.changes();
    let exit = timeout(WAIT, async {
        loop {
            if let Some(exit) = shell.exit() {
                return exit;
            }
            changes.changed().await.unwrap();
        }
    })
    .await
    .expect("the exit in time");
    assert_eq!(exit.exit_code, Some(5));
}
