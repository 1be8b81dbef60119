//! Change tracking against real clusters, for every REST version each cluster serves.
//!
//! Other tests (and other test binaries) change the clusters at the same time, so "nothing
//! changed" is waited for rather than assumed.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use slurm_client::{Change, JobState, JobTracker, NodeTracker, Poll, Request, Tracked, Tracker};
use support::Target;

/// Polls every 500 ms until `done` accepts a poll (at most two minutes).
async fn poll_until<T: Tracked>(
    tracker: &mut Tracker<T>,
    what: &str,
    done: impl Fn(&Poll<T>) -> bool,
) -> Poll<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let poll = tracker
            .poll()
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if poll.unchanged {
            assert!(
                poll.changes.is_empty() && poll.received == 0,
                "{what}: {poll:?}"
            );
        }
        if done(&poll) {
            return poll;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The raw answer to the tracker's request, to measure what an unchanged poll transfers
/// (`None` if the cluster changed in between).
async fn raw_size(t: &Target, what: &str, last_update: i64) -> Option<usize> {
    let value = if t.version >= slurm_client::ApiVersion::V0_0_42 {
        last_update.to_string()
    } else {
        "now".to_string()
    };
    let request = Request::get(format!("/slurm/{}/{what}/", t.version)).query("update_time", value);
    match t.client.request::<Value>(request).await {
        Ok(r) => {
            let listed = r.value[what].as_array().map_or(0, Vec::len);
            (listed == 0).then(|| r.value.to_string().len())
        }
        Err(e) if e.status() == Some(304) => Some(0),
        Err(e) => panic!("{}: raw {what}: {e}", t.label()),
    }
}

#[tokio::test]
async fn job_tracker_follows_a_job() {
    for t in support::targets().await {
        let label = t.label();
        let mut tracker = JobTracker::new(t.client.clone());
        let first = tracker.poll().await.unwrap();
        assert!(first.full && !first.unchanged, "{label}");
        assert_eq!(first.changes.len(), tracker.len(), "{label}");
        assert!(
            first.changes.iter().all(|c| matches!(c, Change::Added(_))),
            "{label}"
        );
        assert!(tracker.last_update().is_some(), "{label}");

        let what = format!("{label}: an unchanged job poll");
        poll_until(&mut tracker, &what, |p| p.unchanged).await;
        if let Some(bytes) = raw_size(&t, "jobs", tracker.last_update().unwrap()).await {
            assert!(
                bytes < 4096,
                "{label}: an unchanged job poll carried {bytes} bytes"
            );
        }

        // A held job stays pending: it appears as Added; cancelling it is a Changed.
        let job = t.quick_job("track", 1).hold(true);
        let id = t.client.submit_job(&job).await.unwrap().value.job_id;
        let what = format!("{label}: job {id} Added");
        poll_until(&mut tracker, &what, |p| {
            p.changes
                .iter()
                .any(|c| matches!(c, Change::Added(j) if j.id == id))
        })
        .await;
        assert!(tracker.get(&id).is_some_and(|j| j.held), "{label}");
        assert!(tracker.snapshot().any(|j| j.id == id), "{label}");

        t.client.cancel_job(id).await.unwrap();
        let what = format!("{label}: job {id} Changed to CANCELLED");
        poll_until(&mut tracker, &what, |p| {
            p.changes.iter().any(|c| {
                matches!(c, Change::Changed { old, new }
                    if new.id == id
                        && old.state == JobState::Pending
                        && new.state == JobState::Cancelled)
            })
        })
        .await;
    }
}

#[tokio::test]
async fn node_tracker_sees_unchanged_and_resyncs() {
    for t in support::targets().await {
        let label = t.label();
        let mut tracker = NodeTracker::new(t.client.clone());
        let first = tracker.poll().await.unwrap();
        assert!(first.full && first.received > 0, "{label}");
        assert_eq!(first.changes.len(), first.received, "{label}");
        let what = format!("{label}: an unchanged node poll");
        poll_until(&mut tracker, &what, |p| p.unchanged).await;
        if let Some(bytes) = raw_size(&t, "nodes", tracker.last_update().unwrap()).await {
            assert!(
                bytes < 4096,
                "{label}: an unchanged node poll carried {bytes} bytes"
            );
        }
        // With a resync every poll, every poll re-lists.
        let mut resyncing = NodeTracker::new(t.client.clone()).resync_every(1);
        resyncing.poll().await.unwrap();
        let again = resyncing.poll().await.unwrap();
        assert!(again.full && again.received > 0, "{label}");
    }
}
