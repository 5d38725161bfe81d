//! Issue 15, acceptance 2: appending streamed text costs linear time. Alone in its test
//! binary (so in a process of its own under nextest and `cargo test` alike): it measures
//! the process's CPU time, which other tests running in the same process would add to.

use kandev_domain::MessageId;
use kandev_store::Store;

mod common;
#[path = "common/streaming.rs"]
mod streaming;
use streaming::{fixture, new_message};

/// The CPU time this process used so far (every thread: the store's connection thread
/// too). The cost the test compares: wall-clock time on a shared machine also counts the
/// time other processes held the CPU, which made the ratio flaky under load (22.9 once in
/// CI at load 14, with the work itself linear).
fn cpu_time() -> std::time::Duration {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage of this process");
    let micros = |t: nix::sys::time::TimeVal| {
        std::time::Duration::from_secs(t.tv_sec() as u64)
            + std::time::Duration::from_micros(t.tv_usec() as u64)
    };
    micros(usage.user_time()) + micros(usage.system_time())
}

/// Appends `n` chunks of 100 bytes, one transaction each (as the stream writer does), and
/// returns the CPU time it took.
async fn append_chunks(store: &Store, id: &MessageId, n: usize) -> std::time::Duration {
    let chunk = "x".repeat(99) + "\n";
    let started = cpu_time();
    for i in 0..n {
        let mut tx = store.begin_write().await.unwrap();
        let appended = tx.append_message(id, &chunk).await.unwrap();
        assert_eq!(appended.length, 1 + 100 * (i as u64 + 1));
        tx.commit().await.unwrap();
    }
    cpu_time() - started
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i15_a2_appending_ten_times_the_chunks_costs_less_than_twenty_times_the_time() {
    let f = fixture("linear").await;
    let small = new_message(&f.store, &f.session, "s").await;
    let t_small = append_chunks(&f.store, &small, 1_000).await;
    let large = new_message(&f.store, &f.session, "l").await;
    let t_large = append_chunks(&f.store, &large, 10_000).await;
    let ratio = t_large.as_secs_f64() / t_small.as_secs_f64();
    eprintln!("1,000 chunks: {t_small:?}; 10,000 chunks: {t_large:?}; ratio {ratio:.2}");
    assert!(
        ratio < 20.0,
        "10,000 chunks took {ratio:.1}× the time of 1,000 ({t_large:?} vs {t_small:?})"
    );
    let whole = f.store.get_message(&large).await.unwrap();
    assert_eq!(whole.content.len(), 1 + 100 * 10_000);
    assert!(whole.content.starts_with("lxxx"), "the first chunk comes after the stored text");
}
