//! Issue 47, acceptance 3: on an injected clock, a schedule fires exactly once per occurrence,
//! across a restart (a new store and engine on the same database file) and across both
//! daylight-saving changes of a named zone, by the stated rules (docs/intake.md "Schedules").

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use kandev_domain::intake::MissedRuns;
use kandev_domain::workflow::{StepSpec, WorkflowSpec};
use kandev_domain::{Clock, Timestamp, WorkspaceId};
use kandev_engine::{
    AgentCommand, BuiltinMockLauncher, Engine, EngineConfig, Fired, ScheduleInput,
};
use kandev_store::{Location, Store, TaskFilter, UuidGenerator};

/// "Now", set by the test.
#[derive(Clone)]
struct TestClock(Arc<AtomicI64>);

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

impl TestClock {
    fn set(&self, at: Timestamp) {
        self.0.store(at.millis(), Ordering::SeqCst);
    }
}

const MINUTE: i64 = 60_000;

/// `2027-mm-ddThh:mm:00Z` in milliseconds.
fn utc(text: &str) -> Timestamp {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).unwrap();
    Timestamp((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

struct World {
    dir: tempfile::TempDir,
    clock: TestClock,
    store: Store,
    engine: Engine,
    workspace: WorkspaceId,
}

async fn open(dir: &tempfile::TempDir, clock: &TestClock) -> (Store, Engine) {
    let location = Location::File(dir.path().join("kandev.db"));
    let store =
        Store::open_with(location, Arc::new(clock.clone()), Arc::new(UuidGenerator)).await.unwrap();
    let mock = AgentCommand { program: "kandev".into(), args: vec![], flags: vec![] };
    let config = EngineConfig::new(dir.path().to_path_buf(), mock);
    let engine = Engine::new(store.clone(), config, Arc::new(BuiltinMockLauncher));
    (store, engine)
}

impl World {
    async fn new(start: Timestamp) -> World {
        let dir = tempfile::tempdir().unwrap();
        let clock = TestClock(Arc::new(AtomicI64::new(start.millis())));
        let (store, engine) = open(&dir, &clock).await;
        let mut tx = store.begin_write().await.unwrap();
        let workspace = tx.insert_workspace("w").await.unwrap();
        let spec = WorkflowSpec {
            name: "b".into(),
            description: String::new(),
            steps: vec![StepSpec::named("Todo")],
        };
        tx.insert_workflow(&workspace.id, &spec, None).await.unwrap();
        tx.commit().await.unwrap();
        World { dir, clock, store, engine, workspace: workspace.id }
    }

    async fn schedule(&self, cron: &str, zone: &str, missed: MissedRuns) -> String {
        let input = ScheduleInput {
            name: "nightly".into(),
            cron: cron.into(),
            time_zone: zone.into(),
            title: "Nightly sweep".into(),
            description: String::new(),
            workflow_id: None,
            step_id: None,
            repository_ids: vec![],
            missed,
            enabled: true,
        };
        self.engine.create_schedule(&self.workspace, input).await.unwrap().id
    }

    /// Steps the clock a minute at a time from now to `until`, a pass at each; what fired.
    async fn run_until(&self, until: Timestamp) -> Vec<Fired> {
        let mut fired = vec![];
        let mut now = self.clock.now();
        while now < until {
            now = Timestamp((now.millis() + MINUTE).min(until.millis()));
            self.clock.set(now);
            fired.extend(self.engine.fire_due_schedules().await.unwrap());
        }
        fired
    }

    /// A restart: the engine and store closed, then opened again on the same file.
    async fn restart(&mut self) {
        self.engine.shutdown().await;
        self.store.close().await;
        let (store, engine) = open(&self.dir, &self.clock).await;
        (self.store, self.engine) = (store, engine);
    }

    /// How many tasks the board holds (each fired occurrence makes one).
    async fn task_count(&self) -> usize {
        let workflows = self.store.list_workflows(&self.workspace).await.unwrap();
        let filter = TaskFilter {
            workflow_id: Some(workflows[0].id.clone()),
            step_id: None,
            query: None,
            include_archived: true,
            limit: 1000,
            offset: 0,
        };
        let cards = self.store.list_cards(&filter).await.unwrap();
        cards.len()
    }
}

fn occurrences(fired: &[Fired]) -> Vec<Timestamp> {
    fired.iter().map(|f| f.occurrence).collect()
}

#[tokio::test]
async fn i47_3_a_time_that_does_not_exist_fires_at_the_first_valid_minute_after_it_once() {
    // Europe/Berlin springs forward on 2027-03-28 at 02:00 CET to 03:00 CEST (01:00 UTC).
    let world = World::new(utc("2027-03-26T12:00:00Z")).await;
    world.schedule("30 2 * * *", "Europe/Berlin", MissedRuns::RunOnce).await;
    let fired = world.run_until(utc("2027-03-29T12:00:00Z")).await;
    assert_eq!(
        occurrences(&fired),
        vec![
            utc("2027-03-27T01:30:00Z"), // 02:30 CET
            utc("2027-03-28T01:00:00Z"), // 02:30 does not exist: 03:00 CEST, the gap's end
            utc("2027-03-29T00:30:00Z"), // 02:30 CEST
        ]
    );
    assert!(fired.iter().all(|f| f.task_id.is_some()));
    assert_eq!(world.task_count().await, 3);
}

#[tokio::test]
async fn i47_3_a_time_that_occurs_twice_fires_once_at_its_first_occurrence() {
    // Europe/Berlin falls back on 2027-10-31 at 03:00 CEST to 02:00 CET (01:00 UTC):
    // 02:30 happens at 00:30 UTC and again at 01:30 UTC.
    let world = World::new(utc("2027-10-29T12:00:00Z")).await;
    world.schedule("30 2 * * *", "Europe/Berlin", MissedRuns::RunOnce).await;
    let fired = world.run_until(utc("2027-11-01T12:00:00Z")).await;
    assert_eq!(
        occurrences(&fired),
        vec![
            utc("2027-10-30T00:30:00Z"), // 02:30 CEST
            utc("2027-10-31T00:30:00Z"), // the first 02:30; not again at 01:30 UTC
            utc("2027-11-01T01:30:00Z"), // 02:30 CET
        ]
    );
    assert_eq!(world.task_count().await, 3);
}

#[tokio::test]
async fn i47_3_each_occurrence_fires_once_across_a_restart() {
    let mut world = World::new(utc("2027-03-27T22:00:00Z")).await;
    let id = world.schedule("0 * * * *", "America/New_York", MissedRuns::RunOnce).await;
    // Every hour on the hour, in a zone off UTC by whole hours.
    let first = world.run_until(utc("2027-03-28T00:30:00Z")).await;
    assert_eq!(occurrences(&first), vec![utc("2027-03-27T23:00:00Z"), utc("2027-03-28T00:00:00Z")]);
    // A pass after the restart at the same instant fires nothing again.
    world.restart().await;
    assert_eq!(world.engine.fire_due_schedules().await.unwrap(), vec![]);
    let second = world.run_until(utc("2027-03-28T02:00:00Z")).await;
    assert_eq!(
        occurrences(&second),
        vec![utc("2027-03-28T01:00:00Z"), utc("2027-03-28T02:00:00Z")]
    );
    assert_eq!(world.task_count().await, 4);
    let runs = world.store.schedule_runs(&id, 10).await.unwrap();
    assert_eq!(runs.len(), 4, "one run recorded per occurrence");
}

#[tokio::test]
async fn i47_3_missed_runs_fire_once_at_startup_or_are_skipped_by_the_schedules_setting() {
    let mut world = World::new(utc("2027-06-01T08:00:00Z")).await;
    let once = world.schedule("0 * * * *", "UTC", MissedRuns::RunOnce).await;
    let skip = world.schedule("0 * * * *", "UTC", MissedRuns::Skip).await;
    world.run_until(utc("2027-06-01T09:00:00Z")).await;
    assert_eq!(world.task_count().await, 2, "on time, both fire");

    // Down from 09:10 to 14:20: five occurrences missed.
    world.restart().await;
    world.clock.set(utc("2027-06-01T14:20:00Z"));
    let at_startup = world.engine.fire_due_schedules().await.unwrap();
    let by_schedule = |id: &str| at_startup.iter().find(|f| f.schedule_id == id).cloned().unwrap();
    assert_eq!(by_schedule(&once).occurrence, utc("2027-06-01T14:00:00Z"));
    assert!(by_schedule(&once).task_id.is_some(), "run_once: the newest fires once");
    assert_eq!(by_schedule(&skip).occurrence, utc("2027-06-01T14:00:00Z"));
    assert_eq!(by_schedule(&skip).task_id, None, "skip: recorded as skipped");
    assert_eq!(world.task_count().await, 3);
    // Nothing more for the missed hours; the next occurrence fires for both.
    assert_eq!(world.engine.fire_due_schedules().await.unwrap(), vec![]);
    let next = world.run_until(utc("2027-06-01T15:00:00Z")).await;
    assert_eq!(next.len(), 2);
    assert!(next.iter().all(|f| f.task_id.is_some()));
    assert_eq!(world.task_count().await, 5);
}

#[tokio::test]
async fn i47_3_an_occurrence_whose_task_cannot_be_made_is_a_failed_run_and_the_schedule_goes_on() {
    let world = World::new(utc("2027-06-01T08:00:00Z")).await;
    let id = world.schedule("0 * * * *", "UTC", MissedRuns::RunOnce).await;
    // Its workflow goes away: no task can be made in it any more.
    let workflow = world.store.list_workflows(&world.workspace).await.unwrap()[0].id.clone();
    let mut tx = world.store.begin_write().await.unwrap();
    tx.delete_workflow(&workflow).await.unwrap();
    tx.commit().await.unwrap();

    let fired = world.run_until(utc("2027-06-01T10:30:00Z")).await;
    assert_eq!(occurrences(&fired), vec![utc("2027-06-01T09:00:00Z"), utc("2027-06-01T10:00:00Z")]);
    assert!(fired.iter().all(|f| f.task_id.is_none() && !f.error.is_empty()), "{fired:?}");
    let runs = world.store.schedule_runs(&id, 10).await.unwrap();
    assert_eq!(runs.len(), 2, "each failed occurrence is recorded once, with why");
    assert_eq!(runs[0].error, fired[1].error);
    // Nothing is due between occurrences: the loop waits for the next one.
    let schedule = world.store.get_schedule(&id).await.unwrap();
    assert_eq!(world.engine.next_occurrence(&schedule), Some(utc("2027-06-01T11:00:00Z")));
}

#[tokio::test]
async fn i47_3_a_new_expression_counts_from_its_change_and_fires_nothing_of_the_old_timing() {
    let world = World::new(utc("2027-06-01T08:00:00Z")).await;
    let id = world.schedule("0 0 * * *", "UTC", MissedRuns::RunOnce).await;
    world.run_until(utc("2027-06-01T14:30:00Z")).await;
    let input = ScheduleInput {
        name: "hourly".into(),
        cron: "0 * * * *".into(),
        time_zone: "UTC".into(),
        title: "Hourly sweep".into(),
        description: String::new(),
        workflow_id: None,
        step_id: None,
        repository_ids: vec![],
        missed: MissedRuns::RunOnce,
        enabled: true,
    };
    world.engine.update_schedule(&id, input).await.unwrap();
    assert_eq!(world.engine.fire_due_schedules().await.unwrap(), vec![], "14:00 is not fired late");
    let fired = world.run_until(utc("2027-06-01T15:00:00Z")).await;
    assert_eq!(occurrences(&fired), vec![utc("2027-06-01T15:00:00Z")]);
}
