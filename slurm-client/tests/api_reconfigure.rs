//! `reconfigure` on its own: slurmctld re-executes itself, which would disturb tests
//! running next to it in the same binary.

use crate::support;

use std::time::Duration;

use support::{targets, wait_for};

/// Once per cluster, with its oldest served version.
#[tokio::test]
async fn reconfigure() {
    let mut done = Vec::new();
    for t in targets().await {
        if done.contains(&t.cluster.source) {
            continue;
        }
        done.push(t.cluster.source.clone());
        t.client
            .reconfigure()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.label()));
        let what = format!("{}: slurmctld back after reconfigure", t.label());
        wait_for(&what, Duration::from_secs(60), || async {
            t.client
                .ping()
                .await
                .ok()
                .filter(|p| p.value.any_responding())
        })
        .await;
    }
}
