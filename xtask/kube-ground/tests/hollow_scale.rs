//! The measured run of hollow nodes at scale (ignored: not a CI test). On a ground brought up
//! with hollow nodes, e.g.
//!
//! ```sh
//! cargo xtask kube up --hollow-nodes 1000
//! cargo test -p kube-ground --test integration hollow_scale:: -- --ignored --nocapture
//! ```
//!
//! it creates `HOLLOW_SCALE_PODS` pods (10,000 by default) without a node, as fast as 16 at a time
//! allow, for the ground's scheduler to place on the hollow nodes, waits until all are Running
//! and Ready, deletes them all, and prints the times and what the ground's processes cost.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use test_support::ground::Ground;

const LABEL: &str = "kube-ground.slurm-rs.dev/hollow";
const STATE: &str = "/run/slurm-dev/kube/state.json";

/// CPU seconds (user + system) and RSS and peak RSS (MiB) of a process, from /proc.
fn usage(pid: u32) -> (f64, f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, s)| s).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime: the 14th and 15th fields, 12th and 13th after the command's name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (ticks / 100.0, kib("VmRSS:"), kib("VmHWM:"))
}

/// The ground's processes by name (`kube up`'s state file).
fn daemons() -> BTreeMap<String, u32> {
    let raw = std::fs::read_to_string(STATE).expect("the ground's state file");
    let state: serde_json::Value = serde_json::from_str(&raw).unwrap();
    state["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_string(),
                d["pid"].as_u64().unwrap() as u32,
            )
        })
        .collect()
}

fn report(what: &str, before: &BTreeMap<String, (f64, f64, f64)>) {
    println!("{what}:");
    for (name, pid) in daemons() {
        let (cpu, rss, peak) = usage(pid);
        let spent = cpu - before.get(&name).map_or(0.0, |b| b.0);
        println!("  {name:<12} cpu {spent:>8.1} s   rss {rss:>7.1} MiB   peak {peak:>7.1} MiB");
    }
}

fn snapshot() -> BTreeMap<String, (f64, f64, f64)> {
    daemons()
        .into_iter()
        .map(|(name, pid)| (name, usage(pid)))
        .collect()
}

fn ready(p: &Pod) -> bool {
    let status = p.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the measured run at scale, on a ground with --hollow-nodes (see the module's header)"]
async fn hollow_scale() {
    let g = Ground::connect();
    let total: usize = std::env::var("HOLLOW_SCALE_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    assert!(
        daemons().contains_key("hollow"),
        "the ground has no hollow nodes: cargo xtask kube up --hollow-nodes 1000"
    );
    let ns = g.namespace("kg-hollow-scale");
    let client = g.kube_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let before = snapshot();
    let started = Instant::now();

    // Counts the pods Running and Ready, and notes when all are, then when all are gone.
    let watched = pods.clone();
    let watch = tokio::spawn(async move {
        let mut ready_uids: HashSet<String> = HashSet::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut all_ready = None;
        let mut stream = watcher(watched, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    seen.insert(uid.clone());
                    if ready(&p) {
                        ready_uids.insert(uid);
                    }
                    if all_ready.is_none() && ready_uids.len() == total {
                        all_ready = Some(started.elapsed());
                        println!(
                            "all {total} pods Running and Ready after {:.1?}",
                            started.elapsed()
                        );
                    }
                }
                Ok(watcher::Event::Delete(p)) => {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    seen.remove(&uid);
                    ready_uids.remove(&uid);
                    if all_ready.is_some() && seen.is_empty() {
                        return all_ready;
                    }
                }
                _ => {}
            }
        }
        all_ready
    });

    let created = futures::stream::iter(0..total)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("p-{i}"), "labels": {"app": "scale"}},
                    "spec": {
                        "nodeSelector": {LABEL: "true"},
                        "tolerations": [{"key": LABEL, "operator": "Exists"}],
                        "containers": [{
                            "name": "main",
                            "image": "localhost/slurm-dev/toolbox:latest",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }],
                    },
                }))
                .unwrap();
                pods.create(&PostParams::default(), &pod).await.map(drop)
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await;
    created.expect("creating the pods");
    let created_in = started.elapsed();
    println!("{total} pods created in {created_in:.1?}");

    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let running = pods
            .list_metadata(&ListParams::default().fields("status.phase=Running"))
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        if running >= total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{running} of {total} Running after an hour"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    // The watch notes the moment; the list above only polls.
    tokio::time::sleep(Duration::from_secs(2)).await;
    report("to all Running (CPU since the start)", &before);

    let at_rest = snapshot();
    tokio::time::sleep(Duration::from_secs(60)).await;
    report("60 s at rest with every pod Running", &at_rest);

    let deleting = Instant::now();
    let before_delete = snapshot();
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    let all_ready = tokio::time::timeout(Duration::from_secs(3600), watch)
        .await
        .expect("every pod gone within an hour")
        .unwrap();
    println!(
        "all {total} pods deleted (gone) {:.1?} after the delete; Running and Ready after {:.1?}",
        deleting.elapsed(),
        all_ready.unwrap_or_default()
    );
    report("deleting them all", &before_delete);
}
