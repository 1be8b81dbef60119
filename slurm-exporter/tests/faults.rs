//! Faults: slurmrestd going away and coming back under a running exporter, an expired or
//! bad token, a token file fixed while running. The exporter keeps serving its last
//! snapshot, says `slurm_up 0`, counts errors by kind, logs once per state change, and
//! recovers by itself.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Exporter, Proxy, clusters};
use slurm_client::secrecy::ExposeSecret;
use slurm_client::{JwtClaims, mint_hs256};

const SOURCES: &str = "diag,nodes,jobs,partitions";

fn messages(logs: &[String], message: &str, source: &str) -> usize {
    logs.iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"] == message && v["source"] == source)
        .count()
}

#[tokio::test]
async fn slurmrestd_stopped_and_restarted_under_a_running_exporter() {
    for c in clusters() {
        let r = c.release().to_string();
        let mut proxy = Proxy::start(c.rest_addr()).await;
        let mut env = c.exporter_env();
        for (k, v) in env.iter_mut() {
            if k == "SLURM_REST_URL" {
                *v = format!("http://{}", proxy.addr);
            }
        }
        // Change tracking on (the default) and a short interval. The time limit only has to let
        // a large cluster's listings through: an outage must show without waiting for it.
        let exporter = Exporter::start(
            &env,
            &["--interval", "1s", "--timeout", "20s", "--sources", SOURCES],
        );
        exporter.wait_ready().await;
        let before = exporter
            .scrape_until(Duration::from_secs(30), "slurm_up 1", |m| {
                m.get("slurm_up", &[]) == Some(1.0)
            })
            .await;
        let nodes_before = before.sum("slurm_nodes", &[]);
        assert!(nodes_before > 0.0, "{r}");

        proxy.stop().await;
        // Within two intervals, whatever the client's retries and the time limit are; a third
        // interval of slack covers the scrape loop's own pace on a loaded machine.
        let down = exporter
            .scrape_until(
                Duration::from_secs(3),
                "slurm_up 0 with slurmrestd gone",
                |m| {
                    m.get("slurm_up", &[]) == Some(0.0)
                        && m.find("slurm_exporter_source_up", &[])
                            .iter()
                            .all(|s| s.value == 0.0)
                },
            )
            .await;
        // The last snapshot is still served.
        assert_eq!(down.sum("slurm_nodes", &[]), nodes_before, "{r}");
        assert!(
            down.get("slurm_node_info", &[("node", "node1")]).is_some(),
            "{r}"
        );
        let errors = down.sum(
            "slurm_exporter_collect_errors_total",
            &[("source", "nodes")],
        );
        assert!(errors >= 1.0, "{r}: {}", down.text);
        assert!(
            down.find(
                "slurm_exporter_collect_errors_total",
                &[("source", "nodes")]
            )
            .iter()
            .filter(|s| s.value > 0.0)
            .all(|s| ["transport", "timeout"].contains(&s.labels["kind"].as_str())),
            "{r}: {}",
            down.text
        );
        assert_eq!(exporter.get("/readyz", &[]).await.0, 200, "{r}");
        // Several intervals while down.
        tokio::time::sleep(Duration::from_secs(3)).await;

        proxy.restart().await;
        let up = exporter
            .scrape_until(Duration::from_secs(60), "recovery", |m| {
                m.get("slurm_up", &[]) == Some(1.0)
                    && m.find("slurm_exporter_source_up", &[])
                        .iter()
                        .all(|s| s.value == 1.0)
            })
            .await;
        assert_eq!(up.sum("slurm_nodes", &[]), nodes_before, "{r}");

        // One log line per state change, not one per interval.
        let logs = exporter.logs();
        for source in SOURCES.split(',') {
            let failed = messages(&logs, "source failed; serving its previous metrics", source);
            let recovered = messages(&logs, "source recovered", source);
            assert!(
                failed == 1 && recovered == 1,
                "{r} {source}: {failed} failure and {recovered} recovery lines:\n{}",
                logs.join("\n")
            );
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn expired_and_bad_tokens_are_reported_never_logged() {
    for c in clusters() {
        let r = c.release().to_string();
        let key = std::fs::read(c.var("SLURM_JWT_KEY")).unwrap();
        let expired = mint_hs256(
            &key,
            &JwtClaims::new("root", Duration::ZERO)
                .issued_at(unix_now() - 7200)
                .expires_at(unix_now() - 3600),
        );
        let expired = expired.expose_secret().to_string();
        for token in [expired.as_str(), "not.a.token"] {
            let mut env = c.exporter_env();
            env.retain(|(k, _)| k != "SLURM_JWT");
            env.push(("SLURM_JWT".into(), token.into()));
            let exporter = Exporter::start(&env, &["--interval", "500ms", "--sources", SOURCES]);
            exporter.wait_ready().await;
            let m = exporter
                .scrape_until(Duration::from_secs(30), "auth errors", |m| {
                    m.get(
                        "slurm_exporter_collect_errors_total",
                        &[("source", "nodes"), ("kind", "auth")],
                    )
                    .is_some_and(|v| v >= 2.0)
                })
                .await;
            assert_eq!(m.get("slurm_up", &[]), Some(0.0), "{r}");
            let logs = exporter.logs().join("\n");
            assert!(
                !logs.contains(token),
                "{r}: the token is in the log:\n{logs}"
            );
            assert!(logs.contains("authentication failed"), "{r}: {logs}");
        }
    }
}

#[tokio::test]
async fn token_file_fixed_while_running_recovers() {
    for c in clusters() {
        let r = c.release().to_string();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "not.a.token\n").unwrap();
        let mut env = c.exporter_env();
        env.retain(|(k, _)| k != "SLURM_JWT");
        env.push(("SLURM_JWT_FILE".into(), file.display().to_string()));
        let exporter = Exporter::start(&env, &["--interval", "500ms", "--sources", "diag,nodes"]);
        exporter.wait_ready().await;
        exporter
            .scrape_until(Duration::from_secs(30), "slurm_up 0", |m| {
                m.get("slurm_up", &[]) == Some(0.0)
            })
            .await;
        std::fs::write(&file, format!("SLURM_JWT={}\n", c.var("SLURM_JWT"))).unwrap();
        exporter
            .scrape_until(
                Duration::from_secs(30),
                "slurm_up 1 after the token file changed",
                |m| m.get("slurm_up", &[]) == Some(1.0),
            )
            .await;
        assert!(
            !exporter.logs().join("\n").contains(c.var("SLURM_JWT")),
            "{r}"
        );
    }
}

#[tokio::test]
async fn unix_socket_and_minted_tokens() {
    for c in clusters() {
        let r = c.release().to_string();
        let env = vec![
            (
                "SLURM_REST_URL".to_string(),
                format!("unix:{}", c.var("SLURM_REST_SOCKET")),
            ),
            (
                "SLURM_JWT_KEY".to_string(),
                c.var("SLURM_JWT_KEY").to_string(),
            ),
            ("SLURM_USER_NAME".to_string(), "root".to_string()),
        ];
        let exporter = Exporter::start(&env, &["--interval", "1s", "--sources", "diag,nodes"]);
        exporter.wait_ready().await;
        let m = exporter
            .scrape_until(Duration::from_secs(30), "slurm_up 1 over the socket", |m| {
                m.get("slurm_up", &[]) == Some(1.0)
            })
            .await;
        assert!(m.sum("slurm_nodes", &[]) > 0.0, "{r}");
    }
}
