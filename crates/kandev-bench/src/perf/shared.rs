//! What the P scenarios share: the mock agent's `stream` chunks (their text, their write
//! stamps, checking a stream of them), reading a turn off a subscribed socket, sampling the
//! server's RSS, and booting many sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures::future::try_join_all;

use crate::harness::{self, Server, Ws, ms, next_json, str_of};

/// The mock agent's `stream` chunk text (mirrors `kandev_mock_agent::stream_chunk_text`): the
/// index zero-padded to six digits, `|`, then one letter repeated up to `bytes`.
pub fn chunk_text(index: u64, bytes: usize) -> String {
    let mut text = format!("{index:06}|");
    if text.len() >= bytes {
        text.truncate(bytes);
        return text;
    }
    let fill = char::from(b'a' + (index % 26) as u8);
    text.extend(std::iter::repeat_n(fill, bytes - text.len()));
    text
}

pub fn expected_stream(chunks: u64, bytes: usize) -> String {
    (0..chunks).map(|i| chunk_text(i, bytes)).collect()
}

/// The write time of a `stream ... stamp` chunk (mirrors `kandev_mock_agent::chunk_stamp`):
/// `{index:06}|{unix micros:016}|` then the fill.
pub fn chunk_stamp(chunk: &str) -> Option<u64> {
    chunk.get(7..23)?.parse().ok()
}

/// Whether `text` is exactly `chunks` stamped chunks of `bytes` bytes, in order, none lost
/// or repeated: each has its index, a stamp, and the fill of its index.
pub fn stamped_stream_ok(text: &str, chunks: u64, bytes: usize) -> bool {
    text.len() == chunks as usize * bytes && first_wrong_chunk(text, chunks, bytes).is_none()
}

/// The index of the first chunk of `text` that is not the one expected there.
pub fn first_wrong_chunk(text: &str, chunks: u64, bytes: usize) -> Option<u64> {
    (0..chunks).find(|&i| !chunk_ok(text, i, bytes))
}

/// Whether chunk `i` of `text` is there and is chunk `i`: its index, a stamp, its fill.
fn chunk_ok(text: &str, i: u64, bytes: usize) -> bool {
    let start = i as usize * bytes;
    let Some(chunk) = text.get(start..start + bytes) else { return false };
    let fill = char::from(b'a' + (i % 26) as u8);
    chunk.starts_with(&format!("{i:06}|"))
        && chunk_stamp(chunk).is_some()
        && chunk.get(23..24) == Some("|")
        && chunk[24..].chars().all(|c| c == fill)
}

/// Now, in microseconds since the Unix epoch (the clock the mock agent stamps chunks with).
pub(super) fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// What one subscriber saw of one turn.
pub struct Seen {
    /// Agent message text, in order of arrival.
    pub text: String,
    /// Gaps between consecutive chunk arrivals.
    pub gaps: Vec<f64>,
    pub first: Option<Instant>,
    pub last: Option<Instant>,
    pub chunks: usize,
    /// Agent write -> receive here, per stamped chunk, in ms (`read_stamped_turn`).
    pub latencies: Vec<f64>,
}

/// Reads a subscribed socket until `session.turn.completed`, accumulating agent text.
pub async fn read_turn(ws: &mut Ws, within: Duration) -> Result<Seen> {
    read_stamped_turn(ws, within, None).await
}

/// [`read_turn`] of a `stream ... stamp` turn with chunks of `stamped` bytes: also measures
/// each chunk's latency from the agent's write to its arrival here.
pub async fn read_stamped_turn(
    ws: &mut Ws,
    within: Duration,
    stamped: Option<usize>,
) -> Result<Seen> {
    let mut seen = Seen {
        text: String::new(),
        gaps: vec![],
        first: None,
        last: None,
        chunks: 0,
        latencies: vec![],
    };
    let mut measured = 0usize;
    let deadline = Instant::now() + within;
    let mut agent_ids: Vec<String> = vec![];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = next_json(ws, left).await?;
        if frame["type"] == "resync_required" {
            bail!("a reading subscriber was told resync_required: {frame}");
        }
        let now = Instant::now();
        let text = match frame["action"].as_str() {
            Some("session.message.added") if frame["payload"]["message"]["kind"] == "agent" => {
                agent_ids.push(str_of(&frame["payload"]["message"]["id"])?);
                frame["payload"]["message"]["content"].as_str().map(str::to_owned)
            }
            Some("session.message.updated") if frame["payload"]["delta"].is_string() => {
                let id = str_of(&frame["payload"]["message_id"])?;
                if agent_ids.contains(&id) {
                    frame["payload"]["delta"].as_str().map(str::to_owned)
                } else {
                    None
                }
            }
            Some("session.turn.completed") => return Ok(seen),
            _ => None,
        };
        if let Some(text) = text {
            if let Some(last) = seen.last {
                seen.gaps.push(ms(now - last));
            }
            seen.first.get_or_insert(now);
            seen.last = Some(now);
            seen.text.push_str(&text);
            seen.chunks += 1;
            if let Some(bytes) = stamped.filter(|b| *b > 0) {
                let received = unix_micros();
                while (measured + 1) * bytes <= seen.text.len() {
                    let chunk = seen.text.get(measured * bytes..(measured + 1) * bytes);
                    if let Some(stamp) = chunk.and_then(chunk_stamp) {
                        seen.latencies.push(received.saturating_sub(stamp) as f64 / 1000.0);
                    }
                    measured += 1;
                }
            }
        }
    }
}

/// Peak server RSS while `running` holds, sampled every 50 ms.
pub(crate) fn rss_sampler(pid: u32, running: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut peak = 0;
        while running.load(Ordering::Relaxed) {
            peak = peak.max(harness::rss_kib(pid));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        peak
    })
}

/// Sessions created and booted concurrently (in batches, so boot storms stay bounded).
pub(super) async fn live_sessions(
    server: &Server,
    workflow: &str,
    n: usize,
) -> Result<Vec<String>> {
    let mut out = vec![];
    for batch in (0..n).collect::<Vec<_>>().chunks(25) {
        let made =
            try_join_all(batch.iter().map(|i| async move {
                server.live_session(workflow, &format!("session {i}")).await
            }))
            .await?;
        out.extend(made);
    }
    Ok(out)
}
