//! The runner (issue 20) with real agent processes: handshake and version check, replay of
//! unacknowledged output after a reconnect (exactly once), backpressure past the buffer
//! bound, and the owner-gone grace period.

use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use kandev_runtime::runner::proto::{
    Data, FromRunner, PROTOCOL_VERSION, ProtocolError, RunnerCodec, ServerCodec, SpawnSpec,
    ToRunner,
};
use kandev_runtime::runner::{AckPolicy, Runner, RunnerClient, RunnerConfig};
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
    conn.send(ToRunner::Input { exec: "x1".into(), data: go }).await.unwrap();
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
    let start = std::time::Instant::now();
    while runner.buffered("big").unwrap() < LIMIT {
        assert!(start.elapsed() < WAIT, "the runner reads the agent's output");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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
    assert!(err.err().unwrap().contains("was not found"));
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
    let start = std::time::Instant::now();
    while runner.buffered("c1") != Some(unacked) {
        assert!(start.elapsed() < WAIT, "the runner takes the acknowledgement sent before close");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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
    let start = std::time::Instant::now();
    while runner.buffered("c1").is_some() {
        assert!(start.elapsed() < WAIT, "the runner forgets a committed exit");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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
    let runner = Runner::new(RunnerConfig::default());
    let (mut conn, _) = connect(&runner).await;
    conn.send(ToRunner::Spawn { exec: "deaf".into(), spec: sh("exec sleep 600") }).await.unwrap();
    assert!(matches!(next(&mut conn).await, FromRunner::Spawned { .. }));
    let chunk = Bytes::from(vec![b'x'; 1 << 20]);
    let frames = kandev_runtime::runner::INPUT_LIMIT / chunk.len() + 2;
    let sending = tokio::spawn(async move {
        for _ in 0..frames {
            let frame = ToRunner::Input { exec: "deaf".into(), data: Data(chunk.clone()) };
            conn.send(frame).await.unwrap();
        }
        conn
    });
    let mut conn = timeout(WAIT, sending).await.expect("the runner reads input").unwrap();
    match next(&mut conn).await {
        FromRunner::Error { message } => assert!(message.contains("stdin"), "{message}"),
        other => panic!("expected an error for the full stdin, got {other:?}"),
    }
    assert!(runner.buffered("deaf").is_some());
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
    timeout(WAIT, async {
        while !mark.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the runner stops its agent past the grace period");

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
