//! Nodes through the version-neutral API, for every REST version each cluster serves.
//!
//! State changes use only the highest-numbered node and restore it, so that tests running
//! at the same time keep the others.

use crate::support;

use slurm_client::{ApiVersion, Error, NodeFlag, NodeQuery, NodeState, NodeUpdate};
use support::{Target, targets};

/// The highest-numbered node (`node4` of `node1..node4`).
async fn last_node(t: &Target) -> String {
    let nodes = t
        .client
        .list_nodes(&NodeQuery::default())
        .await
        .unwrap()
        .value
        .nodes;
    nodes
        .into_iter()
        .map(|n| n.name)
        .max_by_key(|name| {
            let digits: String = name.chars().filter(char::is_ascii_digit).collect();
            digits.parse::<u64>().unwrap_or(0)
        })
        .expect("the cluster has nodes")
}

#[tokio::test]
async fn list_and_get() {
    for t in targets().await {
        let label = t.label();
        let list = t
            .client
            .list_nodes(&NodeQuery::default())
            .await
            .unwrap()
            .value;
        assert!(!list.nodes.is_empty() && !list.unchanged, "{label}");
        assert!(list.last_update.is_some(), "{label}");
        for node in &list.nodes {
            assert!(node.cpus > 0 && node.memory_mb > 0, "{label}: {node:?}");
            assert!(
                node.partitions.iter().any(|p| p == "debug"),
                "{label}: {node:?}"
            );
            assert!(
                node.cpus_allocated + node.cpus_idle <= node.cpus,
                "{label}: {node:?}"
            );
            assert!(node.version.is_some(), "{label}: {node:?}");
            assert!(
                !matches!(node.state, NodeState::Other(_)),
                "{label}: {node:?}"
            );
        }
        let name = &list.nodes[0].name;
        let node = t.client.get_node(name).await.unwrap().value;
        assert_eq!(&node.name, name, "{label}");
        assert!(node.tres.count("cpu").is_some(), "{label}: {node:?}");
        // The dev clusters give every node two GPUs (gres gpu:2).
        if node.gres.as_deref().is_some_and(|g| g.contains("gpu")) {
            assert!(node.gpus() > 0, "{label}: {node:?}");
        }
        let err = t.client.get_node("no-such-node").await.unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
        let err = t.client.delete_node("no-such-node").await.unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
        let comment = NodeUpdate::new().comment("x");
        let err = t
            .client
            .update_node("no-such-node", &comment)
            .await
            .unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
    }
}

#[tokio::test]
async fn drain_resume_and_comment() {
    for t in targets().await {
        let label = t.label();
        let name = last_node(&t).await;
        let client = t.client.clone();
        let node = name.clone();
        let reason = format!("api test {}", t.version);
        let outcome = tokio::spawn(async move {
            let original = client.get_node(&node).await.unwrap().value;
            client.drain_node(&node, &reason).await.unwrap();
            let drained = client.get_node(&node).await.unwrap().value;
            assert!(drained.has_flag(&NodeFlag::Drain), "{drained:?}");
            assert_eq!(drained.reason.as_deref(), Some(reason.as_str()));
            assert!(!drained.is_available());

            client.resume_node(&node).await.unwrap();
            let resumed = client.get_node(&node).await.unwrap().value;
            assert!(!resumed.has_flag(&NodeFlag::Drain), "{resumed:?}");

            let update = NodeUpdate::new().comment("api test comment");
            client.update_node(&node, &update).await.unwrap();
            let commented = client.get_node(&node).await.unwrap().value;
            assert_eq!(commented.comment.as_deref(), Some("api test comment"));
            let restore = NodeUpdate::new().comment(original.comment.unwrap_or_default());
            client.update_node(&node, &restore).await.unwrap();
        })
        .await;
        // Whatever happened, give the node back.
        let _ = t.client.resume_node(&name).await;
        if let Err(panic) = outcome {
            panic!("{label}: {panic}");
        }
        let err = t.client.drain_node(&name, " ").await.unwrap_err();
        assert_eq!(err.label(), "config", "{label}: {err}");
    }
}

#[tokio::test]
async fn create_and_delete_dynamic_node() {
    for t in targets().await {
        let label = t.label();
        let name = format!(
            "dyn{}{}",
            std::process::id() % 1000,
            t.version.as_str().replace('.', "")
        );
        let conf = format!("NodeName={name} CPUs=1 RealMemory=100 State=FUTURE");
        match t.client.create_node(&conf).await {
            Ok(_) => {
                assert!(t.version >= ApiVersion::V0_0_44, "{label}");
                let node = t.client.get_node(&name).await.unwrap().value;
                assert_eq!(node.name, name, "{label}");
                t.client.delete_node(&name).await.unwrap();
                let err = t.client.get_node(&name).await.unwrap_err();
                assert_eq!(err.label(), "not_found", "{label}: {err}");
            }
            Err(Error::Unsupported { version, .. }) => {
                assert!(t.version < ApiVersion::V0_0_44, "{label}");
                assert_eq!(version, t.version, "{label}");
            }
            // Dynamic nodes need MaxNodeCount in slurm.conf; Slurm says so in errors[].
            Err(e @ Error::Rejected { .. }) => {
                assert!(t.version >= ApiVersion::V0_0_44, "{label}: {e}");
                assert!(!e.slurm_errors().is_empty(), "{label}: {e}");
            }
            Err(e) => panic!("{label}: create node: {e}"),
        }
        let err = t.client.create_node("CPUs=1").await.unwrap_err();
        assert_eq!(err.label(), "config", "{label}: {err}");
    }
}

#[tokio::test]
async fn topology_updates_need_v0_0_43() {
    for t in targets().await {
        if t.version >= ApiVersion::V0_0_43 {
            // Moving a node between topologies is in the bridge's test ground tests, which
            // give Slurm a topology.yaml.
            continue;
        }
        let label = t.label();
        let name = last_node(&t).await;
        let update = NodeUpdate::new().topology("topo-switch:s1");
        match t.client.update_node(&name, &update).await {
            Err(Error::Unsupported {
                version, operation, ..
            }) => {
                assert_eq!(version, t.version, "{label}");
                assert_eq!(operation, "node topology update", "{label}");
            }
            other => panic!("{label}: {other:?}"),
        }
        assert_eq!(t.client.get_node(&name).await.unwrap().value.topology, None);
    }
}
