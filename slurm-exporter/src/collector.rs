//! The collection loop: one ticker for all sources; each source runs in its own task with
//! its own time limit, so a slow or failing source never holds up another. When a source
//! finishes, its families replace its previous ones and a new snapshot is assembled from
//! the latest families of every source (a failed source keeps its previous families).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::family::Family;
use crate::render;
use crate::snapshot::{Fragment, Snapshot, SnapshotCell};
use crate::sources::{Collected, Ctx, Failure, Source, SourceKind};
use crate::status::{self, SourceStatus};

/// Source states and the snapshot served to scrapes.
#[derive(Debug)]
pub struct Store {
    sources: Mutex<Vec<SourceStatus>>,
    /// The snapshot scrapes read.
    pub snapshot: SnapshotCell,
}

impl Store {
    /// A store for these sources, with no snapshot yet.
    pub fn new(kinds: &[SourceKind]) -> Store {
        Store {
            sources: Mutex::new(kinds.iter().map(|k| SourceStatus::new(*k)).collect()),
            snapshot: SnapshotCell::default(),
        }
    }

    /// Records the outcome of one collection and publishes a new snapshot once every
    /// source has been tried at least once.
    fn record(
        &self,
        kind: SourceKind,
        duration: Duration,
        outcome: Result<Option<(Fragment, usize)>, Failure>,
    ) {
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = sources.iter_mut().find(|s| s.kind == kind) else {
            return;
        };
        s.attempts += 1;
        s.duration = duration;
        match outcome {
            Ok(fresh) => {
                if let Some((fragment, series)) = fresh {
                    s.fragment = Some(fragment);
                    s.series = series;
                }
                s.last_success = Some(SystemTime::now());
                s.last = Some(Ok(()));
            }
            Err(failure) => {
                *s.errors.entry(failure.kind).or_default() += 1;
                s.last = Some(Err(failure));
            }
        }
        if sources.iter().all(|s| s.last.is_some()) {
            self.snapshot.set(assemble(&sources));
        }
    }

    /// Marks a source down while its collection is still running (not an attempt of its own).
    fn mark_down(&self, kind: SourceKind, failure: Failure) {
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = sources.iter_mut().find(|s| s.kind == kind) else {
            return;
        };
        *s.errors.entry(failure.kind).or_default() += 1;
        s.last = Some(Err(failure));
        if sources.iter().all(|s| s.last.is_some()) {
            self.snapshot.set(assemble(&sources));
        }
    }
}

/// Lays the sources' fragments and the self metrics into one snapshot.
fn assemble(sources: &[SourceStatus]) -> Snapshot {
    let own = Fragment::new(render::render(&status::families(sources)));
    let fragments = sources.iter().filter_map(|s| s.fragment.as_ref());
    Snapshot::assemble(fragments.chain(std::iter::once(&own)))
}

/// Runs the collection loop until the returned set is dropped or aborted.
pub fn spawn(
    sources: Vec<(Box<dyn Source>, Duration)>,
    ctx: Ctx,
    interval: Duration,
    store: Arc<Store>,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    // Each tick carries the context of one collection.
    let (tick, _) = watch::channel(ctx.clone());
    for (source, limit) in sources {
        tasks.spawn(run_source(
            source,
            limit,
            interval,
            tick.subscribe(),
            store.clone(),
        ));
    }
    tasks.spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            tick.send_replace(ctx.next_collection());
        }
    });
    tasks
}

/// One source's task: waits for a tick, collects within its time limit, records the
/// outcome. A tick that arrives while the source is still collecting is skipped, so a
/// source never runs twice at once nor more often than once per interval; it joins the
/// collection of the latest tick.
///
/// A collection still running at the next tick may be a large listing or slurmrestd gone
/// while the client retries; a single ping tells which. If slurmrestd does not answer, the
/// source is down from then on, without waiting for its retries and time limit to run out:
/// an outage shows within two intervals.
async fn run_source(
    mut source: Box<dyn Source>,
    limit: Duration,
    interval: Duration,
    mut tick: watch::Receiver<Ctx>,
    store: Arc<Store>,
) {
    let kind = source.kind();
    let mut previous: Option<Result<(), Failure>> = None;
    while tick.changed().await.is_ok() {
        let ctx = tick.borrow_and_update().clone();
        let started = Instant::now();
        let collect = tokio::time::timeout(limit, source.collect(&ctx));
        tokio::pin!(collect);
        let mut overdue = false;
        let outcome = loop {
            tokio::select! {
                result = &mut collect => break result,
                changed = tick.changed(), if !overdue => {
                    if changed.is_err() {
                        return;
                    }
                    let next = tick.borrow_and_update().clone();
                    if let Err(failure) = next.reachable(interval / 2).await {
                        overdue = true;
                        let state = Err(failure.clone());
                        log_change(kind, previous.as_ref(), &state, started.elapsed());
                        previous = Some(state);
                        store.mark_down(kind, failure);
                    }
                }
            }
        };
        let outcome = match outcome {
            Ok(result) => result,
            Err(_) => Err(Failure {
                kind: "timeout",
                message: format!("no complete answer within {limit:?}"),
            }),
        };
        let duration = started.elapsed();
        let state = outcome.as_ref().map(|_| ()).map_err(Clone::clone);
        log_change(kind, previous.as_ref(), &state, duration);
        previous = Some(state);
        let rendered = match outcome {
            Ok(Collected::Families(families)) => Ok(Some(prepare(families).await)),
            Ok(Collected::Unchanged) => Ok(None),
            Err(failure) => Err(failure),
        };
        store.record(kind, duration, rendered);
        // Skip ticks that came while collecting.
        tick.borrow_and_update();
    }
}

/// Renders and compresses a source's families (with its series count) on a blocking
/// thread: for thousands of nodes that takes milliseconds, which scrapes must not wait for.
async fn prepare(families: Vec<Family>) -> (Fragment, usize) {
    let series = families.iter().map(Family::len).sum();
    let fragment = tokio::task::spawn_blocking(move || Fragment::new(render::render(&families)))
        .await
        .expect("rendering does not panic");
    (fragment, series)
}

/// Logs when a source's state changes (first result, failure, recovery), not on every
/// interval; a failing source whose error changes only logs at debug level.
fn log_change(
    kind: SourceKind,
    previous: Option<&Result<(), Failure>>,
    now: &Result<(), Failure>,
    took: Duration,
) {
    let source = kind.name();
    match (previous, now) {
        (None, Ok(())) => info!(source, ?took, "source collected"),
        (Some(Err(_)), Ok(())) => info!(source, ?took, "source recovered"),
        (Some(Ok(())), Ok(())) => debug!(source, ?took, "source collected"),
        (Some(Err(_)), Err(new)) => {
            debug!(source, kind = new.kind, error = %new.message, "source still failing")
        }
        (None | Some(Ok(())), Err(new)) => warn!(
            source,
            kind = new.kind,
            error = %new.message,
            "source failed; serving its previous metrics"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::CollectFuture;

    /// A source that plays back a script of outcomes.
    struct Scripted {
        kind: SourceKind,
        script: Vec<Result<f64, &'static str>>,
        delay: Duration,
    }

    impl Source for Scripted {
        fn kind(&self) -> SourceKind {
            self.kind
        }
        fn collect<'a>(&'a mut self, _ctx: &'a Ctx) -> CollectFuture<'a> {
            Box::pin(async move {
                tokio::time::sleep(self.delay).await;
                let next = if self.script.len() > 1 {
                    self.script.remove(0)
                } else {
                    self.script[0]
                };
                match next {
                    Ok(v) => {
                        let mut f = Family::gauge("slurm_test_value", "A test value.", &["source"]);
                        f.set(&[self.kind.name()], v);
                        Ok(Collected::Families(vec![f]))
                    }
                    Err(kind) => Err(Failure {
                        kind,
                        message: "scripted".into(),
                    }),
                }
            })
        }
    }

    fn ctx() -> Ctx {
        Ctx::new(
            slurm_client::Client::builder("http://127.0.0.1:9")
                .build()
                .unwrap(),
            2,
        )
    }

    fn text(store: &Store) -> String {
        String::from_utf8(store.snapshot.get().unwrap().prometheus.to_vec()).unwrap()
    }

    /// Succeeds once, then never answers, as a collection whose client keeps retrying.
    struct Hangs {
        answered: bool,
    }

    impl Source for Hangs {
        fn kind(&self) -> SourceKind {
            SourceKind::Diag
        }
        fn collect<'a>(&'a mut self, _ctx: &'a Ctx) -> CollectFuture<'a> {
            Box::pin(async move {
                if std::mem::replace(&mut self.answered, true) {
                    std::future::pending::<()>().await;
                }
                Ok(Collected::Families(Vec::new()))
            })
        }
    }

    #[tokio::test]
    async fn a_collection_hanging_on_an_unreachable_slurmrestd_is_down_within_two_intervals() {
        let store = Arc::new(Store::new(&[SourceKind::Diag]));
        let interval = Duration::from_millis(300);
        // The time limit is far away: only the ping (to a port nothing listens on) can tell.
        let _tasks = spawn(
            vec![(
                Box::new(Hangs { answered: false }),
                Duration::from_secs(600),
            )],
            ctx(),
            interval,
            store.clone(),
        );
        let started = Instant::now();
        let mut seen_up = false;
        loop {
            if let Some(snapshot) = store.snapshot.get() {
                let t = String::from_utf8(snapshot.prometheus.to_vec()).unwrap();
                seen_up |= t.contains("slurm_up 1\n");
                if t.contains("slurm_up 0\n") {
                    assert!(seen_up, "{t}");
                    assert!(
                        t.contains("slurm_exporter_source_up{source=\"diag\"} 0\n"),
                        "{t}"
                    );
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "slurm_up still not 0 {:?} after slurmrestd went away",
                started.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failed_source_keeps_its_metrics_and_slow_source_does_not_block() {
        let store = Arc::new(Store::new(&[SourceKind::Diag, SourceKind::Jobs]));
        let diag = Scripted {
            kind: SourceKind::Diag,
            script: vec![Ok(1.0), Err("transport"), Ok(3.0)],
            delay: Duration::from_millis(10),
        };
        let jobs = Scripted {
            kind: SourceKind::Jobs,
            script: vec![Ok(7.0)],
            delay: Duration::from_secs(100),
        };
        let _tasks = spawn(
            vec![
                (Box::new(diag), Duration::from_secs(5)),
                (Box::new(jobs), Duration::from_secs(5)),
            ],
            ctx(),
            Duration::from_secs(10),
            store.clone(),
        );
        // Nothing is published before every source was tried once.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(store.snapshot.get().is_none());
        // jobs times out at 5 s; diag succeeded.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let t = text(&store);
        assert!(t.contains("slurm_test_value{source=\"diag\"} 1\n"), "{t}");
        assert!(t.contains("slurm_up 1\n"), "{t}");
        assert!(
            t.contains("slurm_exporter_collect_errors_total{source=\"jobs\",kind=\"timeout\"} 1\n"),
            "{t}"
        );
        // Second round: diag fails and keeps its value.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let t = text(&store);
        assert!(t.contains("slurm_test_value{source=\"diag\"} 1\n"), "{t}");
        assert!(t.contains("slurm_up 0\n"), "{t}");
        assert!(
            t.contains("slurm_exporter_source_up{source=\"diag\"} 0\n"),
            "{t}"
        );
        // Third round: recovered.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let t = text(&store);
        assert!(t.contains("slurm_test_value{source=\"diag\"} 3\n"), "{t}");
        assert!(t.contains("slurm_up 1\n"), "{t}");
        assert!(
            t.contains("slurm_exporter_collections_total{source=\"diag\"} 3\n"),
            "{t}"
        );
    }
}
