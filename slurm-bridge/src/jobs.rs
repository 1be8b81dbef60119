//! What the bridge knows of its Slurm jobs, and the task that keeps it current.
//!
//! The bridge never lists every job of the cluster while it runs: that is what made Slinky's
//! bridge decode 30 MB per scheduling attempt (#45). It lists once at start, to find its jobs
//! again by their `admin_comment`, and afterwards reads only its own jobs that can still change
//! (pending or running) one by one, so its cost grows with its own jobs, not with the
//! cluster's. A change of state, reason or nodes wakes the workloads of the job's pods.
//!
//! Pending and running jobs are watched through their states (`GET …/jobs/state/`, about 80
//! bytes a job, 100 jobs a request). Jobs that may start (pending ones) are polled every 25 ms
//! while one was submitted less than 5 s ago (Slurm starts most jobs on its next scheduling
//! pass, within a second of their submission), else every 100 ms; at least a quarter
//! millisecond per job. Running jobs, whose next change is their end, are polled apart, every
//! follow period (at least a millisecond per job): when thousands of pods run, the polls that
//! notice a start stay as short as the pending jobs are few (with one poll for all, 5,000
//! running jobs made it one poll every 5 s, and a started job waited that long for its pod's
//! binding). Both polls run apart from the reads, so that no round of reads holds up the poll
//! that sees the next start. A job whose state moved is read at once: a pending job that
//! started, by its resource layout (`GET …/resources/{id}`, REST v0.0.44+: its nodes in 1 KiB,
//! against 10 KiB for the whole job, which matters when a scheduling pass starts many jobs at
//! once), any other whole (for its nodes, its reason); these reads go first. Besides that, a
//! pending job is read whole a follow period after the last read, twice as long after each read
//! that found nothing changed, up to 16 periods (a new pending reason shows that late at worst:
//! a burst of jobs waiting for a backfill pass must not flood slurmrestd), a running one every
//! ten periods (the nodes of a running job change only when an admin shrinks it), but no more
//! than one such routine read a tick, and no more than eight routine reads in a round, so that
//! thousands of running or pending jobs neither flood slurmrestd nor hold up the reads that
//! matter.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use futures::StreamExt;
use slurm_client::{Client, Job, JobQuery, JobState, JobStatus};
use tokio::sync::mpsc;

use crate::translate::AdminComment;

/// One job of the bridge.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `<ns>/<name>` of its pods, from its admin_comment.
    pub pods: Vec<String>,
    /// What Slurm last said.
    pub seen: Seen,
    /// When to read it next.
    next_read: Instant,
    /// When the book got it.
    added: Instant,
    /// The state the last poll gave, when it differs from `seen`'s.
    polled: Option<JobState>,
    /// Whether the last poll found its state moved (or the job gone), until it is read.
    moved: bool,
    /// Whether `seen` is a whole record from Slurm (not what a submission or a layout implied).
    whole: bool,
    /// Whole reads in a row of this pending job that found nothing changed.
    quiet_reads: u32,
    /// When the bridge first saw the job running (a poll or a read).
    start_seen: Option<Instant>,
}

/// The follower's first read of a job its caller has just read itself.
const FIRST_WAIT: Duration = Duration::from_millis(100);

/// A running job is read whole every this many follow periods.
const RUNNING_READ_PERIODS: u32 = 10;
/// The most follow periods between two whole reads of a pending job (for its reason): each
/// read that finds nothing changed doubles the wait, from one period. Read each period, the
/// 500 pending jobs of a burst that waits for a backfill pass were 5 MB of slurmrestd a second
/// (the scale bench), and slowed the reads of the jobs that started.
const PENDING_READ_PERIODS: u32 = 16;

/// How often the pending jobs' states are polled while one of them is fresh: new in the book
/// for less than [`FRESH_FOR`].
const FRESH_POLL: Duration = Duration::from_millis(25);
const FRESH_FOR: Duration = Duration::from_secs(5);
/// How often the states are polled otherwise.
const STATE_POLL: Duration = Duration::from_millis(100);
/// The most routine whole reads (of jobs whose state did not move) in one round of reads: a
/// round of a burst's hundred pending jobs held up the reads of jobs that had started.
const ROUTINE_READS_A_ROUND: usize = 8;
/// The least time between two routine whole reads of running jobs (10 a second at most: at
/// 500 running jobs, one each ten periods made 50 reads of 10 KiB a second).
const ROUTINE_READ_GAP: Duration = Duration::from_millis(100);

/// The wait before the next poll of `polled` jobs' states: at least a quarter millisecond a
/// job (a millisecond made the 500 pending jobs of a burst wait half a second for their start
/// to be seen, the p99 of RUNNING → bound at scale).
fn state_poll_period(polled: usize, any_fresh: bool) -> Duration {
    let base = if any_fresh { FRESH_POLL } else { STATE_POLL };
    base.max(Duration::from_micros(polled as u64 * 250))
}

impl Entry {
    fn new(pods: Vec<String>, seen: Seen) -> Entry {
        let now = Instant::now();
        Entry {
            pods,
            whole: matches!(seen, Seen::Job(_)),
            seen,
            next_read: now,
            added: now,
            polled: None,
            moved: false,
            quiet_reads: 0,
            start_seen: None,
        }
    }
}

/// The wait before the next whole read of a job (its state is polled apart): for a pending
/// one a period, doubled by each of its `quiet_reads` up to [`PENDING_READ_PERIODS`]; for any
/// other [`RUNNING_READ_PERIODS`].
fn next_wait(pending: bool, quiet_reads: u32, period: Duration) -> Duration {
    if pending {
        period * (1 << quiet_reads.min(10)).min(PENDING_READ_PERIODS)
    } else {
        period * RUNNING_READ_PERIODS
    }
}

/// What Slurm last said about a job.
#[derive(Debug, Clone)]
pub enum Seen {
    /// Not read yet.
    Unread,
    /// Slurm has no such job.
    Missing,
    /// Its last reading.
    Job(Box<Job>),
}

impl Entry {
    fn active(&self) -> bool {
        match &self.seen {
            Seen::Unread => true,
            Seen::Missing => false,
            Seen::Job(job) => !job.state.is_finished(),
        }
    }
}

/// The bridge's jobs, shared by the scheduler and the follower.
#[derive(Debug, Clone, Default)]
pub struct JobBook {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    jobs: HashMap<u32, Entry>,
    /// The longest wait between two reads of a job that can still change.
    period: Duration,
    /// Whether slurmrestd answers resource layouts (REST v0.0.44+); cleared by an
    /// `Unsupported` answer.
    layouts: bool,
    /// When the next routine whole read of a running job may be.
    next_routine: Option<Instant>,
    /// Jobs cancelled for a refit (see [`JobBook::refitted`]).
    refitted: HashSet<u32>,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            jobs: HashMap::new(),
            period: Duration::from_secs(1),
            layouts: true,
            next_routine: None,
            refitted: HashSet::new(),
        }
    }
}

/// How a due job is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// `GET …/job/{id}`.
    Whole,
    /// `GET …/resources/{id}`, for the nodes of a pending job that the poll saw start.
    Layout,
}

impl JobBook {
    /// Lists every job once and keeps those that are the bridge's (see [`is_ours`]).
    pub async fn load(client: &Client, mcs_label: &str) -> Result<JobBook, slurm_client::Error> {
        let listing = client.list_jobs(&JobQuery::default()).await?.into_value();
        let book = JobBook::default();
        for job in listing.jobs {
            if !is_ours(&job, mcs_label) {
                continue;
            }
            let Some(comment) = job.admin_comment.as_deref().and_then(AdminComment::parse) else {
                continue;
            };
            book.insert(job.id, comment.pods, Seen::Job(Box::new(job)));
        }
        Ok(book)
    }

    /// Records a job that its caller reads itself (just listed, or just submitted and read at
    /// once): the follower's first read comes a [`FIRST_WAIT`] later, not a second read now.
    pub fn insert(&self, id: u32, pods: Vec<String>, seen: Seen) {
        let mut entry = Entry::new(pods, seen);
        entry.next_read += FIRST_WAIT;
        self.inner
            .lock()
            .expect("not poisoned")
            .jobs
            .insert(id, entry);
    }

    /// Records a job just submitted for `pods`, as pending: Slurm starts a job on a scheduling
    /// pass after its submission, never in it. Its state is polled from now on (a start is seen
    /// within a poll) and it is read whole after a period, for its pending reason.
    pub fn submitted(&self, id: u32, pods: Vec<String>) {
        let mut job = Job::default();
        job.id = id;
        job.state = JobState::Pending;
        let mut entry = Entry::new(pods, Seen::Job(Box::new(job)));
        entry.whole = false;
        let mut inner = self.inner.lock().expect("not poisoned");
        entry.next_read += inner.period;
        inner.jobs.insert(id, entry);
    }

    /// When the bridge first saw job `id` running.
    pub fn start_seen(&self, id: u32) -> Option<Instant> {
        self.inner
            .lock()
            .expect("not poisoned")
            .jobs
            .get(&id)?
            .start_seen
    }

    /// Starts following a job a pod names that the book does not know (read on the next poll).
    pub fn track(&self, id: u32) {
        self.inner
            .lock()
            .expect("not poisoned")
            .jobs
            .entry(id)
            .or_insert_with(|| Entry::new(Vec::new(), Seen::Unread));
    }

    /// Forgets a job (its pods are gone).
    pub fn forget(&self, id: u32) {
        self.inner.lock().expect("not poisoned").jobs.remove(&id);
    }

    /// The entry of job `id`.
    pub fn get(&self, id: u32) -> Option<Entry> {
        self.inner
            .lock()
            .expect("not poisoned")
            .jobs
            .get(&id)
            .cloned()
    }

    /// The pending or running job whose admin_comment names `pod` (`<ns>/<name>`), if any: the
    /// job of a pod that was not labelled yet when the bridge stopped.
    pub fn active_job_of(&self, pod: &str) -> Option<u32> {
        let inner = self.inner.lock().expect("not poisoned");
        inner
            .jobs
            .iter()
            .filter(|(id, _)| !inner.refitted.contains(id))
            .filter(|(_, e)| e.active() && e.pods.iter().any(|p| p == pod))
            .map(|(id, _)| *id)
            .max()
    }

    /// The jobs that can still change and are due for a read at `now`, with their pods, and
    /// how to read each: every one whose state moved or that may start, and of the running
    /// ones due for their routine read the longest due, if [`ROUTINE_READ_GAP`] has passed
    /// since the last; the reads that can bind pods first.
    pub fn due(&self, now: Instant) -> Vec<(u32, Vec<String>, Read)> {
        let mut inner = self.inner.lock().expect("not poisoned");
        let mut routine: Vec<(Instant, u32)> = Vec::new();
        let mut due: Vec<_> = inner
            .jobs
            .iter()
            .filter(|(_, e)| e.active() && e.next_read <= now)
            .filter(|(id, e)| {
                let quiet_running = matches!(&e.seen, Seen::Job(job) if job.state == JobState::Running)
                    && e.polled.is_none();
                if quiet_running {
                    routine.push((e.next_read, **id));
                }
                !quiet_running
            })
            .map(|(id, e)| {
                let read = read_of(e, inner.layouts);
                // The reads that bind pods first: a started job's layout, then jobs whose
                // state moved (or never read), then the routine reads of pending ones.
                let rank = match read {
                    Read::Layout => 0,
                    Read::Whole if e.moved || !e.whole => 1,
                    Read::Whole => 2,
                };
                (rank, *id, e.pods.clone(), read)
            })
            .collect();
        let allowed = inner.next_routine.is_none_or(|at| at <= now);
        if let Some((_, id)) = routine.into_iter().min().filter(|_| allowed) {
            due.push((3, id, inner.jobs[&id].pods.clone(), Read::Whole));
            inner.next_routine = Some(now + ROUTINE_READ_GAP);
        }
        due.sort_by_key(|(rank, id, _, _)| (*rank, *id));
        // The reads that can bind pods all; routine ones a round's worth, the rest later.
        let mut routine = 0;
        due.into_iter()
            .filter(|(rank, ..)| {
                routine += usize::from(*rank > 1);
                *rank <= 1 || routine <= ROUTINE_READS_A_ROUND
            })
            .map(|(_, id, pods, read)| (id, pods, read))
            .collect()
    }

    /// The jobs whose states are polled often: those that may start (last seen in a state
    /// that can still change, other than running), and whether a pending one is fresh (see
    /// [`FRESH_FOR`]). Running jobs are polled apart ([`JobBook::running`]).
    pub fn polled(&self, now: Instant) -> (Vec<u32>, bool) {
        let inner = self.inner.lock().expect("not poisoned");
        let mut fresh = false;
        let mut ids: Vec<u32> = inner
            .jobs
            .iter()
            .filter(|(_, e)| {
                matches!(&e.seen, Seen::Job(job) if !job.state.is_finished() && job.state != JobState::Running)
            })
            .inspect(|(_, e)| {
                let pending = matches!(&e.seen, Seen::Job(job) if job.state == JobState::Pending);
                fresh |= pending && now.saturating_duration_since(e.added) < FRESH_FOR;
            })
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        (ids, fresh)
    }

    /// The jobs last seen running, whose states are polled each period.
    pub fn running(&self) -> Vec<u32> {
        let inner = self.inner.lock().expect("not poisoned");
        let mut ids: Vec<u32> = inner
            .jobs
            .iter()
            .filter(|(_, e)| matches!(&e.seen, Seen::Job(job) if job.state == JobState::Running))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Makes each job of `asked` whose state in `states` is not the one last read (or that
    /// Slurm no longer lists) due for a read now; returns how many.
    pub fn states_seen(&self, asked: &[u32], states: &[JobStatus]) -> usize {
        let answered: HashMap<u32, &JobState> = states
            .iter()
            .filter(|s| s.component.is_none())
            .map(|s| (s.id, &s.state))
            .collect();
        let mut inner = self.inner.lock().expect("not poisoned");
        let now = Instant::now();
        let mut moved = 0;
        for id in asked {
            let Some(entry) = inner.jobs.get_mut(id) else {
                continue;
            };
            let unchanged = matches!(
                (&entry.seen, answered.get(id)),
                (Seen::Job(job), Some(state)) if job.state == **state
            );
            if !unchanged {
                entry.next_read = now;
                entry.polled = answered.get(id).map(|s| (*s).clone());
                entry.moved = true;
                if entry.polled == Some(JobState::Running) {
                    entry.start_seen.get_or_insert(now);
                }
                moved += 1;
            }
        }
        moved
    }

    /// Makes each of `ids` due for a whole read within `wait` at most.
    pub fn read_within(&self, ids: &[u32], wait: Duration) {
        let mut inner = self.inner.lock().expect("not poisoned");
        let latest = Instant::now() + wait;
        for id in ids {
            if let Some(entry) = inner.jobs.get_mut(id) {
                entry.next_read = entry.next_read.min(latest);
            }
        }
    }

    /// The Slurm nodes pending job `id` must not run on, from its last whole reading (or the
    /// last update [`JobBook::excluded`] recorded); `None` when the job is not pending or not
    /// read whole yet.
    pub fn exclusions(&self, id: u32) -> Option<Vec<String>> {
        let inner = self.inner.lock().expect("not poisoned");
        let entry = inner.jobs.get(&id).filter(|e| e.whole)?;
        let Seen::Job(job) = &entry.seen else {
            return None;
        };
        (job.state == JobState::Pending).then(|| {
            let list = job.excluded_nodes.as_deref().unwrap_or_default();
            let names = slurm_client::hostlist::expand(list).unwrap_or_else(|_| vec![list.into()]);
            sorted(names.into_iter().filter(|n| !n.is_empty()))
        })
    }

    /// Records that Slurm accepted `nodes` as pending job `id`'s excluded nodes, until the next
    /// whole read says what Slurm has.
    pub fn excluded(&self, id: u32, nodes: &[String]) {
        let mut inner = self.inner.lock().expect("not poisoned");
        if let Some(Entry {
            seen: Seen::Job(job),
            ..
        }) = inner.jobs.get_mut(&id)
        {
            job.excluded_nodes =
                (!nodes.is_empty()).then(|| slurm_client::hostlist::compress(nodes));
        }
    }

    fn period(&self) -> Duration {
        self.inner.lock().expect("not poisoned").period
    }

    /// Every job that can still change, with its pods.
    pub fn active(&self) -> Vec<(u32, Vec<String>)> {
        let inner = self.inner.lock().expect("not poisoned");
        let mut active: Vec<_> = inner
            .jobs
            .iter()
            .filter(|(_, e)| e.active())
            .map(|(id, e)| (*id, e.pods.clone()))
            .collect();
        active.sort();
        active
    }

    /// Records that job `id` was cancelled for a refit after its pods' labels were taken off:
    /// it is no pod's job any more, even where the pod store still shows the old label.
    pub fn refitted(&self, id: u32) {
        self.inner.lock().expect("not poisoned").refitted.insert(id);
    }

    /// Whether job `id` was cancelled for a refit.
    pub fn was_refit(&self, id: u32) -> bool {
        self.inner
            .lock()
            .expect("not poisoned")
            .refitted
            .contains(&id)
    }

    /// Forgets jobs that ended more than `keep` seconds before `now` (epoch seconds) and jobs
    /// Slurm no longer knows, so that the book holds what can still matter. A pod that still
    /// names a forgotten job has it read again.
    pub fn prune(&self, now: i64, keep: i64) {
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.jobs.retain(|_, e| match &e.seen {
            Seen::Unread => true,
            Seen::Missing => false,
            Seen::Job(job) => {
                !job.state.is_finished() || job.end_time.is_none_or(|end| end + keep > now)
            }
        });
        let Inner { jobs, refitted, .. } = &mut *inner;
        refitted.retain(|id| jobs.contains_key(id));
    }

    /// Reads job `id` now and records the answer; returns whether it changed. A failed read
    /// leaves what was known.
    pub async fn refresh(&self, client: &Client, id: u32) -> Result<bool, slurm_client::Error> {
        let seen = match client.get_job(id).await {
            Ok(job) => Seen::Job(Box::new(job.into_value())),
            Err(slurm_client::Error::NotFound { .. }) => Seen::Missing,
            Err(e) => {
                // Not read again before a period: a slurmrestd that is away is not hammered.
                let mut inner = self.inner.lock().expect("not poisoned");
                let period = inner.period;
                if let Some(entry) = inner.jobs.get_mut(&id) {
                    entry.next_read = Instant::now() + period;
                }
                return Err(e);
            }
        };
        let mut inner = self.inner.lock().expect("not poisoned");
        let period = inner.period;
        let entry = inner
            .jobs
            .entry(id)
            .or_insert_with(|| Entry::new(Vec::new(), Seen::Unread));
        if let Seen::Job(job) = &seen
            && entry.pods.is_empty()
            && let Some(comment) = job.admin_comment.as_deref().and_then(AdminComment::parse)
        {
            entry.pods = comment.pods;
        }
        let changed = !same(&entry.seen, &seen);
        let pending = matches!(&seen, Seen::Job(job) if job.state == JobState::Pending);
        if matches!(&seen, Seen::Job(job) if job.state == JobState::Running) {
            entry.start_seen.get_or_insert_with(Instant::now);
        } else if pending {
            // Requeued: its next start is another.
            entry.start_seen = None;
        }
        entry.quiet_reads = if pending && !changed && entry.whole {
            entry.quiet_reads + 1
        } else {
            0
        };
        entry.seen = seen;
        entry.whole = true;
        entry.polled = None;
        entry.moved = false;
        entry.next_read = Instant::now() + next_wait(pending, entry.quiet_reads, period);
        Ok(changed)
    }

    /// Reads where pending job `id`, which the poll saw start, runs (its resource layout) and
    /// records it as running there; returns whether that changed anything. The whole job is
    /// read a period later, for the rest of its record. Any failure (a version without the
    /// call, a job that ended meanwhile) falls back to [`JobBook::refresh`].
    pub async fn refresh_started(
        &self,
        client: &Client,
        id: u32,
    ) -> Result<bool, slurm_client::Error> {
        let nodes = match client.job_layout(id).await {
            Ok(layout) => layout.into_value(),
            Err(e) => {
                if matches!(e, slurm_client::Error::Unsupported { .. }) {
                    self.inner.lock().expect("not poisoned").layouts = false;
                }
                tracing::debug!(job = id, error = %e, "no resource layout; reading the whole job");
                return self.refresh(client, id).await;
            }
        };
        if nodes.is_empty() {
            return self.refresh(client, id).await;
        }
        let mut inner = self.inner.lock().expect("not poisoned");
        let period = inner.period;
        let Some(entry) = inner.jobs.get_mut(&id) else {
            return Ok(false);
        };
        let Seen::Job(job) = &mut entry.seen else {
            return Ok(false);
        };
        let before = Seen::Job(job.clone());
        started(job, nodes.iter().map(|n| n.node.as_str()));
        let changed = !same(&before, &entry.seen);
        entry.polled = None;
        entry.moved = false;
        entry.next_read = Instant::now() + period;
        let after_start = entry
            .start_seen
            .map(|seen| seen.elapsed().as_millis() as u64);
        tracing::debug!(
            job = id,
            after_start_ms = after_start,
            "read the started job's nodes"
        );
        Ok(changed)
    }
}

/// How to read `entry`: by its layout when it was pending and the poll saw it start (and
/// slurmrestd answers layouts), else whole.
fn read_of(entry: &Entry, layouts: bool) -> Read {
    let started = matches!(&entry.seen, Seen::Job(job) if job.state == JobState::Pending)
        && entry.polled == Some(JobState::Running);
    if started && layouts {
        Read::Layout
    } else {
        Read::Whole
    }
}

/// Records in `job` that it runs on `nodes` (from its resource layout).
fn started<'a>(job: &mut Job, nodes: impl IntoIterator<Item = &'a str>) {
    job.state = JobState::Running;
    job.reason = None;
    job.nodes = Some(slurm_client::hostlist::compress(nodes));
}

/// Whether `job` is this bridge's: an external job whose admin_comment names pods and the
/// bridge's `mcsLabel` (or, written by an older bridge, names no bridge, and the job carries the
/// label as its MCS label). The label is what tells two bridges sharing one Slurm cluster apart
/// (give each its own `mcsLabel`): a bridge never follows, nor cancels as an orphan, another's
/// jobs. The comment is read first because Slurm drops a job's MCS label without an `MCSPlugin`.
pub fn is_ours(job: &Job, mcs_label: &str) -> bool {
    let Some(comment) = job.admin_comment.as_deref().and_then(AdminComment::parse) else {
        return false;
    };
    let label = match &comment.bridge {
        Some(bridge) => bridge.as_str(),
        None => job.mcs_label.as_deref().unwrap_or_default(),
    };
    job.is_external() && label == mcs_label
}

/// Whether two readings differ in anything the decisions use.
fn same(a: &Seen, b: &Seen) -> bool {
    match (a, b) {
        (Seen::Unread, Seen::Unread) | (Seen::Missing, Seen::Missing) => true,
        (Seen::Job(a), Seen::Job(b)) => {
            a.state == b.state && a.reason == b.reason && a.nodes == b.nodes
        }
        _ => false,
    }
}

/// How long an ended job stays in the book (seconds).
const FORGET_AFTER: i64 = 900;

/// Reads the book's active jobs when due (several at once; each at least every `every`) and
/// sends the pods of each job that changed. Runs until the receiver is gone.
pub async fn follow(
    book: JobBook,
    client: Client,
    every: Duration,
    changed: mpsc::UnboundedSender<Vec<String>>,
    metrics: Arc<crate::metrics::Metrics>,
) {
    book.inner.lock().expect("not poisoned").period = every;
    let moved = tokio::sync::Notify::new();
    tokio::select! {
        () = follow_due(&book, &client, every, changed, &metrics, &moved) => {}
        () = poll_pending(&book, &client, every, &metrics, &moved) => {}
        () = poll_running(&book, &client, every, &metrics, &moved) => {}
    }
}

/// Polls the states of the jobs that may start (see [`state_poll_period`]) and wakes the
/// reader when one moved. Apart from the reads: a round of reads held up the next poll, so a
/// start was seen that much later (up to a second at scale).
async fn poll_pending(
    book: &JobBook,
    client: &Client,
    every: Duration,
    metrics: &crate::metrics::Metrics,
    moved: &tokio::sync::Notify,
) {
    loop {
        let (polled, fresh) = book.polled(Instant::now());
        let wait = if polled.is_empty() {
            FRESH_POLL.min(every)
        } else {
            match poll_states(book, client, &polled, metrics).await {
                Some(n) => {
                    if n > 0 {
                        moved.notify_one();
                    }
                    state_poll_period(polled.len(), fresh)
                }
                // slurmrestd away: a whole period, as a failed read waits.
                None => every,
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// Polls the running jobs' states every `every` (at least a millisecond per job), apart from
/// the polls of the pending ones, which a long poll of many running jobs would hold up.
async fn poll_running(
    book: &JobBook,
    client: &Client,
    every: Duration,
    metrics: &crate::metrics::Metrics,
    moved: &tokio::sync::Notify,
) {
    loop {
        let running = book.running();
        if !running.is_empty() && poll_states(book, client, &running, metrics).await > Some(0) {
            moved.notify_one();
        }
        tokio::time::sleep(every.max(Duration::from_millis(running.len() as u64))).await;
    }
}

/// The reads of the due jobs: each tick, and at once when a poll saw a job move.
async fn follow_due(
    book: &JobBook,
    client: &Client,
    every: Duration,
    changed: mpsc::UnboundedSender<Vec<String>>,
    metrics: &crate::metrics::Metrics,
    moved: &tokio::sync::Notify,
) {
    let mut tick = tokio::time::interval(FRESH_POLL.min(every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tidied = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = moved.notified() => {}
        }
        let due = book.due(Instant::now());
        // Each answer is acted on as it arrives, not when the slowest of the tick's reads is in.
        let mut reads = futures::stream::iter(due)
            .map(|(id, pods, read)| {
                let (book, client) = (book.clone(), client.clone());
                async move {
                    let result = match read {
                        Read::Whole => book.refresh(&client, id).await,
                        Read::Layout => book.refresh_started(&client, id).await,
                    };
                    (id, pods, read, result)
                }
            })
            .buffer_unordered(8);
        while let Some((id, pods, read, result)) = reads.next().await {
            let call = match read {
                Read::Whole => "get_job",
                Read::Layout => "job_layout",
            };
            metrics.slurm_call(call, result.as_ref().err());
            match result {
                Ok(true) => {
                    let pods = if pods.is_empty() {
                        book.get(id).map(|e| e.pods).unwrap_or_default()
                    } else {
                        pods
                    };
                    if changed.send(pods).is_err() {
                        return;
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(job = id, error = %e, "cannot read the job; keeping what was known")
                }
            }
        }
        if tidied.elapsed() >= every {
            tidied = Instant::now();
            book.prune(jiff::Timestamp::now().as_second(), FORGET_AFTER);
            metrics.set_jobs(&book.states());
        }
    }
}

/// How many job ids go into one state request (its URL stays under 2 KiB).
const STATES_PER_REQUEST: usize = 100;

/// Asks Slurm for the states of the `polled` jobs and makes those that moved due for a read;
/// returns how many moved, `None` when Slurm did not answer. After a failure every one of them
/// is read whole within a period instead, until a poll answers again.
async fn poll_states(
    book: &JobBook,
    client: &Client,
    polled: &[u32],
    metrics: &crate::metrics::Metrics,
) -> Option<usize> {
    // A few requests at once: a burst's 500 pending jobs are five of them, and a start is seen
    // when the poll ends.
    let chunks: Vec<Vec<u32>> = polled
        .chunks(STATES_PER_REQUEST)
        .map(<[u32]>::to_vec)
        .collect();
    let mut answers = futures::stream::iter(chunks)
        .map(|chunk| {
            let client = client.clone();
            async move {
                let result = client.job_states(&chunk).await;
                (chunk, result)
            }
        })
        .buffer_unordered(STATE_REQUESTS_AT_ONCE);
    let mut moved = 0;
    while let Some((chunk, result)) = answers.next().await {
        metrics.slurm_call("job_states", result.as_ref().err());
        match result {
            Ok(states) => {
                moved += book.states_seen(&chunk, &states.value);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the jobs' states; reading them one by one each period");
                book.read_within(polled, book.period());
                return None;
            }
        }
    }
    Some(moved)
}

/// How many state requests of one poll are sent at once.
const STATE_REQUESTS_AT_ONCE: usize = 4;

impl JobBook {
    /// How many of the book's jobs are in each state (for the metrics).
    pub fn states(&self) -> Vec<(String, usize)> {
        let inner = self.inner.lock().expect("not poisoned");
        let mut counts: HashMap<String, usize> = HashMap::new();
        for entry in inner.jobs.values() {
            let state = match &entry.seen {
                Seen::Unread => "unread".to_owned(),
                Seen::Missing => "missing".to_owned(),
                Seen::Job(job) => state_label(&job.state),
            };
            *counts.entry(state).or_default() += 1;
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort();
        counts
    }
}

fn state_label(state: &JobState) -> String {
    state.to_string().to_lowercase()
}

/// The Slurm node names of a job's allocation, in Slurm's order.
pub fn job_nodes(job: &Job) -> Vec<String> {
    job.nodes
        .as_deref()
        .filter(|n| !n.is_empty() && *n != "(null)")
        .map(|n| slurm_client::hostlist::expand(n).unwrap_or_else(|_| vec![n.to_owned()]))
        .unwrap_or_default()
}

/// Distinct names, sorted (for the pods of a job).
pub fn sorted(names: impl IntoIterator<Item = String>) -> Vec<String> {
    names
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a state poll says of job `id`.
    fn status(id: u32, state: JobState) -> JobStatus {
        let mut s = JobStatus::default();
        s.id = id;
        s.state = state;
        s
    }

    /// The ids and kinds of the reads due at `at`.
    fn reads(book: &JobBook, at: Instant) -> Vec<(u32, Read)> {
        book.due(at)
            .into_iter()
            .map(|(id, _, read)| (id, read))
            .collect()
    }

    /// What a reading of a job in `state` leaves in the book.
    fn seen(state: JobState) -> Seen {
        let mut job = Job::default();
        job.state = state;
        Seen::Job(Box::new(job))
    }

    #[test]
    fn a_job_cancelled_for_a_refit_is_no_pods_job() {
        let book = JobBook::default();
        book.submitted(7, vec!["ns/a".into()]);
        assert_eq!(book.active_job_of("ns/a"), Some(7));
        book.refitted(7);
        assert!(book.was_refit(7));
        assert_eq!(
            book.active_job_of("ns/a"),
            None,
            "not even before its cancellation is read"
        );
        book.forget(7);
        book.prune(0, 0);
        assert!(!book.was_refit(7), "the mark goes with the job");
    }

    #[test]
    fn pending_jobs_are_read_whole_less_often_while_nothing_changes_running_ones_every_ten() {
        let period = Duration::from_secs(1);
        let waits: Vec<u64> = (0..7)
            .map(|quiet| next_wait(true, quiet, period).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 16, 16]);
        assert_eq!(next_wait(true, 40, period), Duration::from_secs(16));
        assert_eq!(next_wait(false, 0, period), Duration::from_secs(10));
    }

    #[test]
    fn a_submitted_job_is_polled_at_once_and_read_whole_after_a_period() {
        let book = JobBook::default();
        book.submitted(9, vec!["ns/a".into()]);
        let now = Instant::now();
        assert_eq!(book.polled(now), (vec![9], true));
        assert!(book.due(now).is_empty());
        assert_eq!(book.due(now + Duration::from_millis(1050)).len(), 1);
        assert_eq!(book.active_job_of("ns/a"), Some(9));
    }

    #[test]
    fn a_failed_state_poll_brings_whole_reads_within_a_period() {
        let book = JobBook::default();
        let mut job = Job::default();
        job.state = JobState::Running;
        book.insert(7, vec![], Seen::Job(Box::new(job)));
        let now = Instant::now();
        book.inner
            .lock()
            .unwrap()
            .jobs
            .get_mut(&7)
            .unwrap()
            .next_read = now + Duration::from_secs(10);
        book.read_within(&[7], Duration::from_secs(1));
        let soon = now + Duration::from_secs(1) + Duration::from_millis(50);
        assert_eq!(book.due(soon).len(), 1);
        assert!(book.due(now).is_empty());
    }

    #[test]
    fn fresh_pending_jobs_are_polled_more_often() {
        assert_eq!(state_poll_period(3, true), Duration::from_millis(25));
        assert_eq!(state_poll_period(3, false), Duration::from_millis(100));
        assert_eq!(state_poll_period(400, true), Duration::from_millis(100));
        assert_eq!(state_poll_period(2000, true), Duration::from_millis(500));
        let book = JobBook::default();
        let mut job = Job::default();
        job.state = JobState::Pending;
        book.insert(7, vec![], Seen::Job(Box::new(job)));
        let now = Instant::now();
        assert_eq!(book.polled(now), (vec![7], true));
        assert_eq!(book.polled(now + FRESH_FOR), (vec![7], false));
        // A running job's state is polled apart, less often.
        book.insert(8, vec![], seen(JobState::Running));
        assert_eq!(book.polled(now + FRESH_FOR), (vec![7], false));
        assert_eq!(book.running(), [8]);
    }

    #[test]
    fn routine_reads_of_running_jobs_are_spaced_the_longest_due_first() {
        let book = JobBook::default();
        for id in 1..=5 {
            book.insert(id, vec![], seen(JobState::Running));
        }
        book.insert(6, vec![], seen(JobState::Pending));
        let now = Instant::now();
        for (id, ago) in [(1, 1), (2, 5), (3, 3), (6, 1)] {
            book.inner
                .lock()
                .unwrap()
                .jobs
                .get_mut(&id)
                .unwrap()
                .next_read = now - Duration::from_secs(ago);
        }
        let due = |book: &JobBook, at| -> Vec<u32> {
            book.due(at).into_iter().map(|(id, _, _)| id).collect()
        };
        assert_eq!(due(&book, Instant::now()), [6, 2]);
        // A running job whose state moved is read at once; the next routine read waits.
        book.states_seen(&[4], &[status(4, JobState::Cancelled)]);
        assert_eq!(due(&book, Instant::now()), [4, 6]);
        assert_eq!(due(&book, Instant::now() + ROUTINE_READ_GAP), [4, 6, 2]);
    }

    #[test]
    fn a_job_whose_state_moved_is_due_at_once() {
        let book = JobBook::default();
        for id in [1, 2, 3] {
            book.insert(id, vec![], seen(JobState::Pending));
        }
        book.insert(4, vec![], seen(JobState::Running));
        book.insert(5, vec![], seen(JobState::Running));
        let later = Instant::now() + Duration::from_secs(5);
        for id in [1, 2, 3, 4, 5] {
            book.inner
                .lock()
                .unwrap()
                .jobs
                .get_mut(&id)
                .unwrap()
                .next_read = later;
        }
        assert_eq!(book.polled(Instant::now()).0, [1, 2, 3]);
        assert_eq!(book.running(), [4, 5]);
        // 1 still pending, 2 started, 3 gone from Slurm's answer, 4 still running, 5 ended.
        let moved = book.states_seen(
            &[1, 2, 3, 4, 5],
            &[
                status(1, JobState::Pending),
                status(2, JobState::Running),
                status(4, JobState::Running),
                status(5, JobState::Cancelled),
            ],
        );
        assert_eq!(moved, 3);
        let due: Vec<u32> = book
            .due(Instant::now())
            .into_iter()
            .map(|(id, _, _)| id)
            .collect();
        assert_eq!(due, [2, 3, 5]);
    }

    #[test]
    fn a_pending_job_the_poll_saw_start_is_read_by_its_layout() {
        let book = JobBook::default();
        book.submitted(1, vec!["ns/a".into()]);
        book.submitted(2, vec!["ns/b".into()]);
        book.states_seen(
            &[1, 2],
            &[status(1, JobState::Running), status(2, JobState::Cancelled)],
        );
        assert_eq!(
            reads(&book, Instant::now()),
            [(1, Read::Layout), (2, Read::Whole)]
        );
        // A slurmrestd without the call: whole reads.
        book.inner.lock().unwrap().layouts = false;
        assert_eq!(book.due(Instant::now())[0].2, Read::Whole);
    }

    #[test]
    fn the_reads_that_bind_pods_come_first() {
        let book = JobBook::default();
        let pending = |id| {
            let mut job = Job::default();
            job.id = id;
            job.state = JobState::Pending;
            book.insert(id, vec![], Seen::Job(Box::new(job)));
        };
        // 1 and 2 due for their routine reads; 3 started, 4 ended (both seen by the poll).
        (1..=4).for_each(pending);
        book.states_seen(
            &[3, 4],
            &[status(3, JobState::Running), status(4, JobState::Completed)],
        );
        let later = Instant::now() + Duration::from_secs(2);
        assert_eq!(
            reads(&book, later),
            [
                (3, Read::Layout),
                (4, Read::Whole),
                (1, Read::Whole),
                (2, Read::Whole)
            ]
        );
    }

    #[test]
    fn a_start_is_seen_once_by_the_poll() {
        let book = JobBook::default();
        book.submitted(1, vec!["ns/p".into()]);
        assert_eq!(book.start_seen(1), None);
        book.states_seen(&[1], &[status(1, JobState::Running)]);
        let seen = book.start_seen(1).expect("seen by the poll");
        book.states_seen(&[1], &[status(1, JobState::Running)]);
        assert_eq!(book.start_seen(1), Some(seen), "the first sighting stays");
    }

    #[test]
    fn a_round_reads_every_started_job_but_a_few_routine_ones() {
        let book = JobBook::default();
        let ids: Vec<u32> = (1..=20).collect();
        for &id in &ids {
            let mut job = Job::default();
            job.id = id;
            job.state = JobState::Pending;
            book.insert(id, vec![], Seen::Job(Box::new(job)));
        }
        let started: Vec<JobStatus> = (11..=20).map(|id| status(id, JobState::Running)).collect();
        book.states_seen(&ids[10..], &started);
        let round = reads(&book, Instant::now() + Duration::from_secs(2));
        let layouts = round.iter().filter(|(_, r)| *r == Read::Layout).count();
        assert_eq!(layouts, 10, "every started job: {round:?}");
        assert_eq!(round.len(), 10 + ROUTINE_READS_A_ROUND, "{round:?}");
        assert_eq!(
            round[10],
            (1, Read::Whole),
            "routine reads after, oldest id first"
        );
    }

    #[test]
    fn a_layout_makes_the_job_running_on_its_nodes() {
        let mut job = Job::default();
        job.state = JobState::Pending;
        job.reason = Some("Priority".into());
        started(&mut job, ["n2", "n1", "n3"]);
        assert_eq!(job.state, JobState::Running);
        assert_eq!(job.reason, None);
        assert_eq!(job_nodes(&job), ["n1", "n2", "n3"]);
    }

    #[test]
    fn a_tracked_job_is_due_at_once_an_inserted_one_later_and_an_ended_one_never() {
        let book = JobBook::default();
        book.track(1);
        book.insert(2, vec![], Seen::Missing);
        book.insert(3, vec!["ns/c".into()], Seen::Unread);
        let now = Instant::now();
        assert_eq!(book.due(now), [(1, vec![], Read::Whole)]);
        assert_eq!(
            book.due(now + FIRST_WAIT),
            [
                (1, vec![], Read::Whole),
                (3, vec!["ns/c".to_string()], Read::Whole)
            ]
        );
        book.inner
            .lock()
            .unwrap()
            .jobs
            .get_mut(&1)
            .unwrap()
            .next_read = now + FIRST_WAIT;
        assert!(book.due(now).is_empty());
        assert_eq!(book.due(now + FIRST_WAIT).len(), 2);
    }

    #[test]
    fn only_its_own_jobs() {
        let job = |flags: &[&str], mcs: Option<&str>, comment: Option<&str>| {
            let mut job = Job::default();
            job.flags = flags.iter().map(|f| f.to_string()).collect();
            job.mcs_label = mcs.map(String::from);
            job.admin_comment = comment.map(String::from);
            job
        };
        let pods = Some(r#"{"pods":["ns/a"]}"#);
        assert!(is_ours(
            &job(&["EXTERNAL_JOB"], Some("kubernetes"), pods),
            "kubernetes"
        ));
        assert!(!is_ours(
            &job(&["EXTERNAL_JOB"], Some("other-cluster"), pods),
            "kubernetes"
        ));
        assert!(!is_ours(&job(&[], Some("kubernetes"), pods), "kubernetes"));
        assert!(!is_ours(
            &job(&["EXTERNAL_JOB"], Some("kubernetes"), Some("a note")),
            "kubernetes"
        ));
        assert!(is_ours(&job(&["EXTERNAL_JOB"], None, pods), ""));

        // Without an MCSPlugin, Slurm keeps no MCS label: the comment tells.
        let marked = Some(r#"{"pods":["ns/a"],"bridge":"kubernetes"}"#);
        assert!(is_ours(&job(&["EXTERNAL_JOB"], None, marked), "kubernetes"));
        assert!(is_ours(
            &job(&["EXTERNAL_JOB"], Some("kubernetes"), marked),
            "kubernetes"
        ));
        assert!(!is_ours(&job(&["EXTERNAL_JOB"], None, marked), "other"));
        // Another bridge's job is not ours even where Slurm kept no label.
        let theirs = Some(r#"{"pods":["ns/a"],"bridge":"other"}"#);
        assert!(!is_ours(
            &job(&["EXTERNAL_JOB"], None, theirs),
            "kubernetes"
        ));
        assert!(!is_ours(&job(&[], None, marked), "kubernetes"));
    }

    #[test]
    fn ended_jobs_are_forgotten_after_a_while() {
        let book = JobBook::default();
        let mut ended = Job::default();
        ended.state = JobState::Completed;
        ended.end_time = Some(1_000);
        book.insert(1, vec![], Seen::Job(Box::new(ended)));
        let mut running = Job::default();
        running.state = JobState::Running;
        book.insert(2, vec![], Seen::Job(Box::new(running)));
        book.insert(3, vec![], Seen::Missing);
        book.insert(4, vec![], Seen::Unread);
        book.prune(1_500, 900);
        assert!(book.get(1).is_some() && book.get(3).is_none());
        book.prune(2_000, 900);
        assert!(book.get(1).is_none() && book.get(2).is_some() && book.get(4).is_some());
    }
}
