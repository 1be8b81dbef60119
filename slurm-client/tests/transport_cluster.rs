//! The transport core against real slurmrestd servers (see `tests/common/mod.rs` for how
//! they are found): version negotiation, authentication, token rotation, Unix sockets,
//! and how real answers map to errors.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Cluster, ClusterClient as _};
use serde::Deserialize;
use serde_json::{Value, json};
use slurm_client::{
    ApiVersion, Client, ClientBuilder, Error, JwtClaims, MintedToken, Request, StaticToken,
    TokenFile, mint_hs256,
};

fn jobs_path(v: ApiVersion) -> String {
    format!("/slurm/{v}/jobs")
}

async fn assert_auth_error(client: &Client, path: &str, cluster: &Cluster) {
    match client.request::<Value>(Request::get(path)).await {
        Err(e) if e.label() == "auth" => {}
        other => panic!(
            "{}: expected an auth error for GET {path}, got {other:?}",
            cluster.source
        ),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn negotiates_newest_version_both_compiled_and_served() {
    for cluster in common::clusters() {
        let client = cluster.client();
        let served = client.served_versions().await.unwrap();
        match cluster.release() {
            Some("24.11") => assert_eq!(served, ApiVersion::ALL[..3], "{}", cluster.source),
            Some("26.05") => assert_eq!(served, ApiVersion::ALL[2..], "{}", cluster.source),
            _ => assert!(!served.is_empty()),
        }
        let expected = served.iter().copied().filter(|v| v.is_compiled()).max();
        let negotiated = client.negotiate().await.unwrap();
        assert_eq!(Some(negotiated.version), expected, "{}", cluster.source);
        let release = negotiated
            .release
            .clone()
            .expect("ping reports meta.slurm.release");
        if let Some(r) = cluster.release() {
            assert!(
                release.starts_with(r),
                "{}: release {release} vs {r}",
                cluster.source
            );
        }
        // Stored: a second call gives the same answer.
        assert_eq!(client.negotiate().await.unwrap(), negotiated);
        assert_eq!(client.release().await.unwrap(), Some(release));
    }
}

#[tokio::test]
async fn every_served_compiled_version_can_be_pinned() {
    for cluster in common::clusters() {
        let served = cluster.client().served_versions().await.unwrap();
        for v in served.into_iter().filter(|v| v.is_compiled()) {
            let client = cluster.builder().version(v).build().unwrap();
            assert_eq!(client.version().await.unwrap(), v);
            let ping = client.get_json(&format!("/slurm/{v}/ping")).await.unwrap();
            assert!(ping["pings"].is_array(), "{}: {ping}", cluster.source);
        }
    }
}

#[tokio::test]
async fn unserved_versions_are_reported() {
    for cluster in common::clusters() {
        let client = cluster.client();
        let err = client.get_json("/slurm/v0.0.39/ping").await.unwrap_err();
        assert!(
            matches!(err, Error::NotFound { status: 404, .. }),
            "{err:?}"
        );

        let served = client.served_versions().await.unwrap();
        if let Some(v) = ApiVersion::compiled()
            .into_iter()
            .find(|v| !served.contains(v))
        {
            let pinned = cluster.builder().version(v).build().unwrap();
            match pinned.negotiate().await {
                Err(Error::NoCommonVersion { tried }) => assert_eq!(tried, vec![v]),
                other => panic!("{}: pinning unserved {v} gave {other:?}", cluster.source),
            }
        }
    }
}

#[tokio::test]
async fn bad_missing_and_expired_tokens_are_auth_errors() {
    for cluster in common::clusters() {
        let v = cluster.client().version().await.unwrap();
        let jobs = jobs_path(v);

        let bad = ClientBuilder::new(cluster.url())
            .token(StaticToken::new("bad.bad.bad"))
            .user_name(cluster.user())
            .build()
            .unwrap();
        assert_auth_error(&bad, &jobs, &cluster).await;
        if cluster.has_accounting() {
            assert_auth_error(&bad, &format!("/slurmdb/{v}/jobs"), &cluster).await;
        }

        let none = ClientBuilder::new(cluster.url()).build().unwrap();
        assert_auth_error(&none, &jobs, &cluster).await;

        let key = std::fs::read(cluster.var("SLURM_JWT_KEY")).unwrap();
        let expired = mint_hs256(
            &key,
            &JwtClaims::new(cluster.user(), Duration::ZERO)
                .issued_at(now() - 7200)
                .expires_at(now() - 3600),
        );
        let expired = ClientBuilder::new(cluster.url())
            .token(StaticToken::new(expired))
            .build()
            .unwrap();
        assert_auth_error(&expired, &jobs, &cluster).await;
    }
}

#[tokio::test]
async fn minted_tokens_are_accepted() {
    for cluster in common::clusters() {
        let minted = MintedToken::from_key_file(cluster.var("SLURM_JWT_KEY"), cluster.user())
            .unwrap()
            .lifespan(Duration::from_secs(300));
        let client = ClientBuilder::new(cluster.url())
            .token(minted)
            .user_name(cluster.user())
            .build()
            .unwrap();
        let v = client.version().await.unwrap();
        let jobs = client
            .request::<Value>(Request::get(jobs_path(v)))
            .await
            .unwrap();
        assert!(jobs.value["jobs"].is_array(), "{}", cluster.source);
    }
}

/// Atomically replaces the token file, as a Kubernetes Secret volume update does.
fn replace(path: &std::path::Path, token: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, token).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn token_file_rotation_is_picked_up_without_failed_requests() {
    for cluster in common::clusters() {
        let key = std::fs::read(cluster.var("SLURM_JWT_KEY")).unwrap();
        let fresh = |offset: u64| {
            use secrecy::ExposeSecret;
            let iat = now() - offset;
            let token = mint_hs256(
                &key,
                &JwtClaims::new(cluster.user(), Duration::ZERO)
                    .issued_at(iat)
                    .expires_at(iat + 600),
            );
            token.expose_secret().to_owned()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, format!("SLURM_JWT={}\n", cluster.jwt())).unwrap();
        let client = ClientBuilder::new(cluster.url())
            .token(TokenFile::new(&path))
            .user_name(cluster.user())
            .build()
            .unwrap();
        let jobs = jobs_path(client.version().await.unwrap());

        // Rotate between valid tokens while requests keep going: none may fail.
        let tokens = [cluster.jwt().to_owned(), fresh(0), fresh(5), fresh(10)];
        let stop = Arc::new(AtomicBool::new(false));
        let rotator = {
            let (stop, path, tokens) = (stop.clone(), path.clone(), tokens.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    replace(&path, &tokens[i % tokens.len()]);
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(15)).await;
                }
                i
            })
        };
        for n in 0..40 {
            if let Err(e) = client.request::<Value>(Request::get(&jobs)).await {
                panic!(
                    "{}: request {n} failed during rotation: {e}",
                    cluster.source
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(
            rotator.await.unwrap() > 3,
            "the file was rotated several times"
        );

        // The file really is re-read: a bad token fails at once, a good one works again.
        replace(&path, "bad.bad.bad");
        assert_auth_error(&client, &jobs, &cluster).await;
        replace(&path, &fresh(0));
        client.request::<Value>(Request::get(&jobs)).await.unwrap();
    }
}

#[tokio::test]
async fn unix_socket_url_works() {
    for cluster in common::clusters() {
        let socket = cluster.var("SLURM_REST_SOCKET");
        let client = ClientBuilder::new(format!("unix:{socket}"))
            .token(StaticToken::new(cluster.jwt().to_string()))
            .user_name(cluster.user())
            .build()
            .unwrap();
        let negotiated = client.negotiate().await.unwrap();
        assert!(negotiated.release.is_some());
        assert!(client.endpoint().starts_with("unix:"));
        let jobs = client
            .get_json(&jobs_path(negotiated.version))
            .await
            .unwrap();
        assert!(jobs["jobs"].is_array(), "{}: {jobs}", cluster.source);
    }
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct WrongPings {
    pings: Vec<WrongPing>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct WrongPing {
    hostname: u64,
}

#[tokio::test]
async fn real_answers_map_to_the_right_errors() {
    for cluster in common::clusters() {
        let client = cluster.client();
        let v = client.version().await.unwrap();

        // Unknown job: 404 with Slurm error 2017.
        let err = client
            .get_json(&format!("/slurm/{v}/job/999999"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::NotFound { status: 404, .. }),
            "{err:?}"
        );
        assert!(
            err.slurm_errors()
                .iter()
                .any(|e| e.error_number == Some(2017)),
            "{err:?}"
        );

        // An answer that does not match the expected type names the field.
        let err = client
            .request::<WrongPings>(Request::get(format!("/slurm/{v}/ping")))
            .await
            .unwrap_err();
        let Error::Decode { json_path, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(json_path, "pings[0].hostname");

        // Slurm refuses a job for a partition that does not exist (500 or 422): every entry kept.
        let job = json!({"job": {
            "partition": "no-such-partition", "name": "rejected",
            "script": "#!/bin/sh\ntrue\n", "current_working_directory": "/tmp",
            "environment": ["PATH=/bin:/usr/bin"]
        }});
        let err = client
            .request::<Value>(Request::post(format!("/slurm/{v}/job/submit")).json(&job))
            .await
            .unwrap_err();
        assert_eq!(err.label(), "rejected", "{err}");
        assert!(matches!(err.status(), Some(500 | 422)), "{err:?}");
        let first = &err.slurm_errors()[0];
        assert!(
            first.error_number.is_some() && first.source.is_some(),
            "{first:?}"
        );

        // A query Slurm cannot parse: rejected with errors[] (422).
        let err = client
            .request::<Value>(Request::get(jobs_path(v)).query("update_time", "abc"))
            .await
            .unwrap_err();
        assert_eq!(err.label(), "rejected", "{err}");

        // A body that is not JSON: 400 with a plain-text reason.
        let err = client
            .request::<Value>(
                Request::post(format!("/slurm/{v}/job/submit")).json_bytes("{not json"),
            )
            .await
            .unwrap_err();
        let Error::BadRequest { text, .. } = &err else {
            panic!("{err:?}")
        };
        assert!(!text.is_empty());
    }
}

#[tokio::test]
async fn raw_get_json_and_query_strings() {
    for cluster in common::clusters() {
        let client = cluster.client();
        let v = client.version().await.unwrap();
        let diag = client.get_json(&format!("/slurm/{v}/diag")).await.unwrap();
        assert!(diag["statistics"].is_object(), "{}: {diag}", cluster.source);
        let jobs = client
            .get_json(&format!("slurm/{v}/jobs?update_time=0"))
            .await
            .unwrap();
        assert!(jobs["jobs"].is_array());
    }
}
