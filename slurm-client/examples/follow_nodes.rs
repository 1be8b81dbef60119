//! Follows the nodes of a cluster with a [`NodeTracker`]: prints every node when first seen,
//! then each change (state, reason, allocation, …) as it happens. Runs until Ctrl-C, or for
//! `--polls N` polls.
//!
//! ```sh
//! set -a; . /run/slurm-dev/26.05/cluster.env; set +a   # SLURM_REST_URL, SLURM_JWT, …
//! cargo run -p slurm-client --example follow_nodes [-- --polls N] [--interval 5s]
//! ```
//!
//! Meanwhile, e.g. `slurm nodes drain node1 --reason test` or a running job shows up here.

use std::time::Duration;

use slurm_client::{Change, Client, Node, NodeTracker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut polls: Option<u64> = None;
    let mut interval = Duration::from_secs(5);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--polls" => {
                let n = value("--polls")?;
                polls = Some(n.parse().map_err(|e| format!("--polls {n}: {e}"))?);
            }
            // `5` (seconds), `500ms`, `1m`, …
            "--interval" => interval = slurm_client::parse_duration(&value("--interval")?)?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }

    let client = Client::from_env()?;
    // A poll of an unchanged cluster costs slurmctld next to nothing (see the tracking docs).
    let mut tracker = NodeTracker::new(client);
    let mut done = 0;
    loop {
        let poll = tracker.poll().await?;
        for change in &poll.changes {
            match change {
                Change::Added(node) => println!("+ {:<12} {}", node.name, summary(node)),
                Change::Changed { old, new } => {
                    println!("~ {:<12} {}", new.name, differences(old, new).join(", "))
                }
                Change::Removed(node) => println!("- {:<12} removed", node.name),
            }
        }
        if poll.full {
            eprintln!("{} node(s); polling every {interval:?}", tracker.len());
        }
        done += 1;
        if polls.is_some_and(|n| done >= n) {
            return Ok(());
        }
        tokio::time::sleep(interval).await;
    }
}

/// `IDLE+DRAIN`: the base state and its flags, as `sinfo` shows them.
fn state(node: &Node) -> String {
    std::iter::once(node.state.to_string())
        .chain(node.state_flags.iter().map(|f| f.to_string()))
        .collect::<Vec<_>>()
        .join("+")
}

fn summary(node: &Node) -> String {
    let mut text = format!(
        "{} cpus {}/{} mem {}/{} MiB",
        state(node),
        node.cpus_allocated,
        node.cpus,
        node.memory_allocated_mb,
        node.memory_mb
    );
    if let Some(reason) = &node.reason {
        text.push_str(&format!(" reason {reason:?}"));
    }
    text
}

/// What changed, in words: the fields people watch, else that something else did.
fn differences(old: &Node, new: &Node) -> Vec<String> {
    let mut out = Vec::new();
    let (was, is) = (state(old), state(new));
    if was != is {
        out.push(format!("{was} -> {is}"));
    }
    if old.cpus_allocated != new.cpus_allocated {
        out.push(format!(
            "cpus allocated {} -> {}",
            old.cpus_allocated, new.cpus_allocated
        ));
    }
    if old.memory_allocated_mb != new.memory_allocated_mb {
        out.push(format!(
            "memory allocated {} -> {} MiB",
            old.memory_allocated_mb, new.memory_allocated_mb
        ));
    }
    if old.reason != new.reason {
        out.push(format!(
            "reason {:?} -> {:?}",
            old.reason.as_deref().unwrap_or(""),
            new.reason.as_deref().unwrap_or("")
        ));
    }
    if out.is_empty() {
        out.push("other fields changed".into());
    }
    out
}
