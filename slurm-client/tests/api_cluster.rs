//! Partitions, reservations, diag, ping, licenses and shares through the
//! version-neutral API, for every REST version each cluster serves.

use crate::support;

use std::time::{SystemTime, UNIX_EPOCH};

use slurm_client::{ApiVersion, Error, ReservationSpec, ReservationUpdate, SharesQuery};
use support::targets;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn partitions() {
    for t in targets().await {
        let label = t.label();
        let list = t.client.list_partitions(None).await.unwrap().value;
        let debug = list
            .partitions
            .iter()
            .find(|p| p.name == "debug")
            .unwrap_or_else(|| panic!("{label}: no debug partition in {list:?}"));
        assert!(debug.is_up(), "{label}: {debug:?}");
        assert!(debug.node_count > 0 && debug.cpus > 0, "{label}: {debug:?}");
        assert!(debug.nodes.is_some(), "{label}: {debug:?}");
        let one = t.client.get_partition("debug").await.unwrap().value;
        assert_eq!(one.name, "debug", "{label}");
        let err = t
            .client
            .get_partition("no-such-partition")
            .await
            .unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
    }
}

#[tokio::test]
async fn reservations_create_update_delete() {
    for t in targets().await {
        let label = t.label();
        let name = format!(
            "api-resv-{}-{}",
            t.version.as_str().replace('.', ""),
            std::process::id()
        );
        // A day ahead, so that it never keeps other tests' jobs off the node.
        let start = now() + 86_400;
        let spec = ReservationSpec::new(&name, 10)
            .start_time(start)
            .node_count(1)
            .users(["root"])
            .flags(["IGNORE_JOBS"]);
        match t.client.create_reservation(&spec).await {
            Err(Error::Unsupported { version, .. }) => {
                assert!(t.version < ApiVersion::V0_0_43, "{label}");
                assert_eq!(version, t.version);
                let err = t.client.delete_reservation(&name).await.unwrap_err();
                assert_eq!(err.label(), "unsupported", "{label}: {err}");
                t.client.list_reservations(None).await.unwrap();
                continue;
            }
            Err(e) => panic!("{label}: create reservation: {e}"),
            Ok(_) => assert!(t.version >= ApiVersion::V0_0_43, "{label}"),
        }
        let created = t.client.get_reservation(&name).await.unwrap().value;
        assert_eq!(created.start_time, Some(start), "{label}: {created:?}");
        assert_eq!(created.end_time, Some(start + 600), "{label}: {created:?}");
        assert_eq!(created.node_count, 1, "{label}: {created:?}");
        assert_eq!(
            created.users,
            vec!["root".to_string()],
            "{label}: {created:?}"
        );
        assert!(
            created.flags.iter().any(|f| f == "IGNORE_JOBS"),
            "{label}: {created:?}"
        );

        let update = ReservationUpdate::default().duration_minutes(20);
        t.client.update_reservation(&name, &update).await.unwrap();
        let updated = t.client.get_reservation(&name).await.unwrap().value;
        assert_eq!(updated.end_time, Some(start + 1200), "{label}: {updated:?}");

        let listed = t.client.list_reservations(None).await.unwrap().value;
        assert!(
            listed.reservations.iter().any(|r| r.name == name),
            "{label}"
        );

        t.client.delete_reservation(&name).await.unwrap();
        let err = t.client.get_reservation(&name).await.unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
        let err = t
            .client
            .update_reservation(&name, &update)
            .await
            .unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
        let err = t
            .client
            .create_reservation(&ReservationSpec::new(&name, 10).node_count(1))
            .await
            .unwrap_err();
        assert_eq!(err.label(), "config", "{label}: {err}");
    }
}

#[tokio::test]
async fn diag_ping_licenses_shares() {
    for t in targets().await {
        let label = t.label();
        let diag = t.client.diag().await.unwrap().value;
        assert!(diag.server_thread_count > 0, "{label}: {diag:?}");
        assert!(
            diag.time.is_some() && diag.since.is_some(),
            "{label}: {diag:?}"
        );
        assert!(
            !diag.rpcs_by_type.is_empty() && !diag.rpcs_by_user.is_empty(),
            "{label}"
        );
        assert!(
            diag.rpcs_by_type.iter().all(|r| !r.message_type.is_empty()),
            "{label}"
        );
        assert!(
            diag.rpcs_by_user.iter().any(|r| r.user == "root"),
            "{label}"
        );

        let ping = t.client.ping().await.unwrap().value;
        assert!(ping.any_responding(), "{label}: {ping:?}");
        assert!(
            !ping.controllers[0].hostname.is_empty(),
            "{label}: {ping:?}"
        );

        t.client.licenses().await.unwrap();

        if t.cluster.has_accounting() {
            let shares = t
                .client
                .shares(&SharesQuery::default())
                .await
                .unwrap()
                .value;
            assert!(!shares.shares.is_empty(), "{label}: {shares:?}");
            assert!(
                shares.shares.iter().any(|s| s.name == "root"),
                "{label}: {shares:?}"
            );
            let root_only = SharesQuery::new().user("root");
            t.client.shares(&root_only).await.unwrap();
        }
    }
}
