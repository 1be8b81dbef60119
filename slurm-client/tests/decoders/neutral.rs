//! The version-neutral operations of [`Client`], by the fixture each one reads, so tests can
//! run the client's own decoding and conversion on recorded responses (served by
//! [`super::replay::Replay`]).

use serde::Serialize;
use slurm_client::model::{AssociationQuery, JobQuery, JobRecordQuery, NodeQuery, SharesQuery};
use slurm_client::{ApiVersion, Client, Error, Response, RetryPolicy, StaticToken};

use super::replay::Replay;
use super::{Fixture, decoders, fixtures, recorded_jobs};

/// A client for `replay`, pinned to `version`, that never retries.
pub fn client(replay: &Replay, version: &str) -> Client {
    let version: ApiVersion = version.parse().expect("a REST version");
    Client::builder(replay.url.clone())
        .token(StaticToken::new("replayed".to_string()))
        .version(version)
        .retry_policy(RetryPolicy::none())
        .build()
        .expect("client")
}

/// Every fixture of a recorded (release, version), served by a new [`Replay`], and a client
/// for it; `None` when the version's cargo feature is off.
pub fn serve(
    release: &'static str,
    version: &'static str,
) -> Option<(Vec<Fixture>, Replay, Client)> {
    decoders(version)?;
    let fixtures = fixtures(release, version);
    let replay = Replay::start();
    serve_all(&replay, &fixtures);
    let client = client(&replay, version);
    Some((fixtures, replay, client))
}

/// Serves every fixture at the path it was recorded from.
pub fn serve_all(replay: &Replay, fixtures: &[Fixture]) {
    for f in fixtures {
        replay.set(&f.path, f.status, std::sync::Arc::new(f.body.clone()));
    }
}

fn value<T: Serialize>(r: Result<Response<T>, Error>) -> Result<serde_json::Value, Error> {
    r.map(|r| serde_json::to_value(&r.value).expect("model types serialize"))
}

/// Calls the operation that reads fixture `name`, giving its result as JSON; `None` when no
/// neutral operation reads that fixture.
pub async fn call(
    client: &Client,
    name: &str,
    release: &str,
) -> Option<Result<serde_json::Value, Error>> {
    let jobs = recorded_jobs(release);
    Some(match name {
        "slurm_ping" => value(client.ping().await),
        "slurm_diag" => value(client.diag().await),
        "slurm_jobs" => value(client.list_jobs(&JobQuery::default()).await),
        "slurm_job" => value(client.get_job(jobs.running).await),
        "slurm_job_array" => value(client.get_job_records(jobs.array).await),
        "slurm_nodes" => value(client.list_nodes(&NodeQuery::default()).await),
        "slurm_node" => value(client.get_node("node1").await),
        "slurm_partitions" => value(client.list_partitions(None).await),
        "slurm_partition" => value(client.get_partition("debug").await),
        "slurm_reservations" => value(client.list_reservations(None).await),
        "slurm_reservation" => value(client.get_reservation("fixtures").await),
        "slurm_licenses" => value(client.licenses().await),
        "slurm_shares" => value(client.shares(&SharesQuery::default()).await),
        "slurmdb_accounts" => value(client.list_accounts().await),
        "slurmdb_account" => value(client.get_account("science").await),
        "slurmdb_users" => value(client.list_users().await),
        "slurmdb_user" => value(client.get_user("root").await),
        "slurmdb_associations" => {
            value(client.list_associations(&AssociationQuery::default()).await)
        }
        "slurmdb_qos" => value(client.list_qos().await),
        "slurmdb_qos_one" => value(client.get_qos("normal").await),
        "slurmdb_clusters" => value(client.list_clusters().await),
        "slurmdb_cluster" => value(client.get_cluster(&jobs.cluster).await),
        "slurmdb_tres" => value(client.list_tres().await),
        "slurmdb_wckeys" => value(client.list_wckeys().await),
        "slurmdb_jobs" => value(client.job_history(&JobRecordQuery::default()).await),
        "slurmdb_job" => value(client.get_job_record(jobs.completed).await),
        _ => return None,
    })
}
