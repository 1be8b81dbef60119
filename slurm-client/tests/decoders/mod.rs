//! Shared by the decode tests: the recorded fixtures (`tests/fixtures/`) and, per REST
//! version, the generated response type each one decodes into (the type the generated
//! client returns for that GET).

#![allow(dead_code)] // each test binary uses a part

pub mod neutral;
pub mod replay;

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

/// The decoders of one generated response type.
#[derive(Clone, Copy)]
pub struct Decoder {
    /// The fixture name (`slurm_jobs`, …).
    pub name: &'static str,
    /// Decodes, as the client does.
    pub decode: fn(&[u8]) -> Result<(), String>,
    /// Decodes and serializes the result back, for comparison with the input.
    pub round_trip: fn(&[u8]) -> Result<Value, String>,
}

/// Decodes `body` as `T`, naming the JSON path of the first mismatch.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| format!("at {}: {}", e.path(), e.inner()))?;
    de.end().map_err(|e| format!("after the value: {e}"))?;
    Ok(value)
}

pub fn decode_only<T: DeserializeOwned>(body: &[u8]) -> Result<(), String> {
    decode::<T>(body).map(drop)
}

pub fn round_trip<T: DeserializeOwned + serde::Serialize>(body: &[u8]) -> Result<Value, String> {
    serde_json::to_value(decode::<T>(body)?).map_err(|e| format!("serializing back: {e}"))
}

macro_rules! table {
    ($($name:literal => $ty:ident),* $(,)?) => {
        &[$($crate::decoders::Decoder {
            name: $name,
            decode: $crate::decoders::decode_only::<$ty>,
            round_trip: $crate::decoders::round_trip::<$ty>,
        }),*]
    };
}
use table;

/// Every (release, REST version) recorded.
pub const RECORDED: &[(&str, &str)] = &[
    ("24.11", "v0.0.40"),
    ("24.11", "v0.0.41"),
    ("24.11", "v0.0.42"),
    ("26.05", "v0.0.42"),
    ("26.05", "v0.0.43"),
    ("26.05", "v0.0.44"),
    ("26.05", "v0.0.45"),
];

/// The decoders of `version`, or `None` when its cargo feature is off.
pub fn decoders(version: &str) -> Option<&'static [Decoder]> {
    match version {
        #[cfg(feature = "v0_0_40")]
        "v0.0.40" => Some(v0_0_40::TABLE),
        #[cfg(feature = "v0_0_41")]
        "v0.0.41" => Some(v0_0_41::TABLE),
        #[cfg(feature = "v0_0_42")]
        "v0.0.42" => Some(v0_0_42::TABLE),
        #[cfg(feature = "v0_0_43")]
        "v0.0.43" => Some(v0_0_43::TABLE),
        #[cfg(feature = "v0_0_44")]
        "v0.0.44" => Some(v0_0_44::TABLE),
        #[cfg(feature = "v0_0_45")]
        "v0.0.45" => Some(v0_0_45::TABLE),
        _ => None,
    }
}

/// One recorded response.
pub struct Fixture {
    pub release: &'static str,
    pub version: &'static str,
    pub name: String,
    pub file: PathBuf,
    pub body: Vec<u8>,
    /// The request path it answered.
    pub path: String,
    /// The HTTP status it came with.
    pub status: u16,
    /// Set when slurmrestd sent something that is not JSON (kept as sent).
    pub invalid_json: Option<String>,
}

impl Fixture {
    pub fn label(&self) -> String {
        format!("{}/{}/{}", self.release, self.version, self.name)
    }
}

/// What the recording created in a release's cluster.
pub struct RecordedJobs {
    pub running: u32,
    pub array: u32,
    pub completed: u32,
    pub failed: u32,
    pub held: u32,
    /// The cluster's name in slurmdbd.
    pub cluster: String,
}

pub fn recorded_jobs(release: &str) -> RecordedJobs {
    let index = recorded(release);
    let id = |key: &str| index["jobs"][key].as_u64().expect("job id") as u32;
    let cluster_path = index["fixtures"]
        .as_object()
        .and_then(|versions| {
            versions
                .values()
                .find_map(|v| v["slurmdb_cluster"]["path"].as_str())
        })
        .expect("a slurmdb_cluster fixture");
    RecordedJobs {
        running: id("running"),
        array: id("array"),
        completed: id("completed"),
        failed: id("failed"),
        held: id("held"),
        cluster: cluster_path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

/// `<release>/recorded.json`.
pub fn recorded(release: &str) -> Value {
    let file = fixtures_dir().join(release).join("recorded.json");
    serde_json::from_slice(&std::fs::read(&file).expect("recorded.json"))
        .expect("recorded.json is JSON")
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture of a recorded (release, version), as listed in `<release>/recorded.json`.
pub fn fixtures(release: &'static str, version: &'static str) -> Vec<Fixture> {
    let dir = fixtures_dir().join(release);
    let index = recorded(release);
    let entries = index["fixtures"][version]
        .as_object()
        .unwrap_or_else(|| panic!("{release}/recorded.json has no {version}"));
    entries
        .iter()
        .map(|(name, entry)| {
            let file = dir.join(version).join(format!("{name}.json"));
            let body = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            Fixture {
                release,
                version,
                name: name.clone(),
                file,
                body,
                path: entry["path"].as_str().expect("path").to_string(),
                status: entry["status"].as_u64().expect("status") as u16,
                invalid_json: entry["invalid_json"].as_str().map(str::to_string),
            }
        })
        .collect()
}

/// The decoder of a fixture.
pub fn decoder(fixture: &Fixture) -> Option<Decoder> {
    decoders(fixture.version)?
        .iter()
        .find(|d| d.name == fixture.name)
        .copied()
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use slurm_client::v0_0_40::types::*;

    pub(super) const TABLE: &[super::Decoder] = super::table![
    "slurm_ping" => V0040OpenapiPingArrayResp,
    "slurm_diag" => V0040OpenapiDiagResp,
    "slurm_jobs" => V0040OpenapiJobInfoResp,
    "slurm_jobs_state" => V0040OpenapiJobStateResp,
    "slurm_job" => V0040OpenapiJobInfoResp,
    "slurm_job_array" => V0040OpenapiJobInfoResp,
    "slurm_job_unknown" => V0040OpenapiJobInfoResp,
    "slurm_nodes" => V0040OpenapiNodesResp,
    "slurm_node" => V0040OpenapiNodesResp,
    "slurm_partitions" => V0040OpenapiPartitionResp,
    "slurm_partition" => V0040OpenapiPartitionResp,
    "slurm_reservations" => V0040OpenapiReservationResp,
    "slurm_reservation" => V0040OpenapiReservationResp,
    "slurm_licenses" => V0040OpenapiLicensesResp,
    "slurm_shares" => V0040OpenapiSharesResp,
    "slurmdb_diag" => V0040OpenapiSlurmdbdStatsResp,
    "slurmdb_config" => V0040OpenapiSlurmdbdConfigResp,
    "slurmdb_accounts" => V0040OpenapiAccountsResp,
    "slurmdb_account" => V0040OpenapiAccountsResp,
    "slurmdb_users" => V0040OpenapiUsersResp,
    "slurmdb_user" => V0040OpenapiUsersResp,
    "slurmdb_associations" => V0040OpenapiAssocsResp,
    "slurmdb_qos" => V0040OpenapiSlurmdbdQosResp,
    "slurmdb_qos_one" => V0040OpenapiSlurmdbdQosResp,
    "slurmdb_tres" => V0040OpenapiTresResp,
    "slurmdb_clusters" => V0040OpenapiClustersResp,
    "slurmdb_cluster" => V0040OpenapiClustersResp,
    "slurmdb_wckeys" => V0040OpenapiWckeyResp,
    "slurmdb_instances" => V0040OpenapiInstancesResp,
    "slurmdb_jobs" => V0040OpenapiSlurmdbdJobsResp,
    "slurmdb_job" => V0040OpenapiSlurmdbdJobsResp,
    ];
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use slurm_client::v0_0_41::types::*;

    pub(super) const TABLE: &[super::Decoder] = super::table![
    "slurm_ping" => SlurmV0041GetPingResponse,
    "slurm_diag" => SlurmV0041GetDiagResponse,
    "slurm_jobs" => V0041OpenapiJobInfoResp,
    "slurm_jobs_state" => V0041OpenapiJobStateResp,
    "slurm_job" => V0041OpenapiJobInfoResp,
    "slurm_job_array" => V0041OpenapiJobInfoResp,
    "slurm_job_unknown" => V0041OpenapiJobInfoResp,
    "slurm_nodes" => V0041OpenapiNodesResp,
    "slurm_node" => V0041OpenapiNodesResp,
    "slurm_partitions" => V0041OpenapiPartitionResp,
    "slurm_partition" => V0041OpenapiPartitionResp,
    "slurm_reservations" => V0041OpenapiReservationResp,
    "slurm_reservation" => V0041OpenapiReservationResp,
    "slurm_licenses" => SlurmV0041GetLicensesResponse,
    "slurm_shares" => V0041OpenapiSharesResp,
    "slurmdb_diag" => SlurmdbV0041GetDiagResponse,
    "slurmdb_config" => V0041OpenapiSlurmdbdConfigResp,
    "slurmdb_accounts" => V0041OpenapiAccountsResp,
    "slurmdb_account" => V0041OpenapiAccountsResp,
    "slurmdb_users" => V0041OpenapiUsersResp,
    "slurmdb_user" => V0041OpenapiUsersResp,
    "slurmdb_associations" => V0041OpenapiAssocsResp,
    "slurmdb_qos" => V0041OpenapiSlurmdbdQosResp,
    "slurmdb_qos_one" => V0041OpenapiSlurmdbdQosResp,
    "slurmdb_tres" => V0041OpenapiTresResp,
    "slurmdb_clusters" => V0041OpenapiClustersResp,
    "slurmdb_cluster" => V0041OpenapiClustersResp,
    "slurmdb_wckeys" => V0041OpenapiWckeyResp,
    "slurmdb_instances" => V0041OpenapiInstancesResp,
    "slurmdb_jobs" => V0041OpenapiSlurmdbdJobsResp,
    "slurmdb_job" => V0041OpenapiSlurmdbdJobsResp,
    ];
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use slurm_client::v0_0_42::types::*;

    pub(super) const TABLE: &[super::Decoder] = super::table![
    "slurm_ping" => V0042OpenapiPingArrayResp,
    "slurm_diag" => V0042OpenapiDiagResp,
    "slurm_jobs" => V0042OpenapiJobInfoResp,
    "slurm_jobs_state" => V0042OpenapiJobStateResp,
    "slurm_job" => V0042OpenapiJobInfoResp,
    "slurm_job_array" => V0042OpenapiJobInfoResp,
    "slurm_job_unknown" => V0042OpenapiJobInfoResp,
    "slurm_nodes" => V0042OpenapiNodesResp,
    "slurm_node" => V0042OpenapiNodesResp,
    "slurm_partitions" => V0042OpenapiPartitionResp,
    "slurm_partition" => V0042OpenapiPartitionResp,
    "slurm_reservations" => V0042OpenapiReservationResp,
    "slurm_reservation" => V0042OpenapiReservationResp,
    "slurm_licenses" => V0042OpenapiLicensesResp,
    "slurm_shares" => V0042OpenapiSharesResp,
    "slurmdb_ping" => V0042OpenapiSlurmdbdPingResp,
    "slurmdb_diag" => V0042OpenapiSlurmdbdStatsResp,
    "slurmdb_config" => V0042OpenapiSlurmdbdConfigResp,
    "slurmdb_accounts" => V0042OpenapiAccountsResp,
    "slurmdb_account" => V0042OpenapiAccountsResp,
    "slurmdb_users" => V0042OpenapiUsersResp,
    "slurmdb_user" => V0042OpenapiUsersResp,
    "slurmdb_associations" => V0042OpenapiAssocsResp,
    "slurmdb_qos" => V0042OpenapiSlurmdbdQosResp,
    "slurmdb_qos_one" => V0042OpenapiSlurmdbdQosResp,
    "slurmdb_tres" => V0042OpenapiTresResp,
    "slurmdb_clusters" => V0042OpenapiClustersResp,
    "slurmdb_cluster" => V0042OpenapiClustersResp,
    "slurmdb_wckeys" => V0042OpenapiWckeyResp,
    "slurmdb_instances" => V0042OpenapiInstancesResp,
    "slurmdb_jobs" => V0042OpenapiSlurmdbdJobsResp,
    "slurmdb_job" => V0042OpenapiSlurmdbdJobsResp,
    ];
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use slurm_client::v0_0_43::types::*;

    pub(super) const TABLE: &[super::Decoder] = super::table![
    "slurm_ping" => V0043OpenapiPingArrayResp,
    "slurm_diag" => V0043OpenapiDiagResp,
    "slurm_jobs" => V0043OpenapiJobInfoResp,
    "slurm_jobs_state" => V0043OpenapiJobStateResp,
    "slurm_job" => V0043OpenapiJobInfoResp,
    "slurm_job_array" => V0043OpenapiJobInfoResp,
    "slurm_job_unknown" => V0043OpenapiJobInfoResp,
    "slurm_nodes" => V0043OpenapiNodesResp,
    "slurm_node" => V0043OpenapiNodesResp,
    "slurm_partitions" => V0043OpenapiPartitionResp,
    "slurm_partition" => V0043OpenapiPartitionResp,
    "slurm_reservations" => V0043OpenapiReservationResp,
    "slurm_reservation" => V0043OpenapiReservationResp,
    "slurm_licenses" => V0043OpenapiLicensesResp,
    "slurm_shares" => V0043OpenapiSharesResp,
    "slurmdb_ping" => V0043OpenapiSlurmdbdPingResp,
    "slurmdb_diag" => V0043OpenapiSlurmdbdStatsResp,
    "slurmdb_config" => V0043OpenapiSlurmdbdConfigResp,
    "slurmdb_accounts" => V0043OpenapiAccountsResp,
    "slurmdb_account" => V0043OpenapiAccountsResp,
    "slurmdb_users" => V0043OpenapiUsersResp,
    "slurmdb_user" => V0043OpenapiUsersResp,
    "slurmdb_associations" => V0043OpenapiAssocsResp,
    "slurmdb_qos" => V0043OpenapiSlurmdbdQosResp,
    "slurmdb_qos_one" => V0043OpenapiSlurmdbdQosResp,
    "slurmdb_tres" => V0043OpenapiTresResp,
    "slurmdb_clusters" => V0043OpenapiClustersResp,
    "slurmdb_cluster" => V0043OpenapiClustersResp,
    "slurmdb_wckeys" => V0043OpenapiWckeyResp,
    "slurmdb_instances" => V0043OpenapiInstancesResp,
    "slurmdb_jobs" => V0043OpenapiSlurmdbdJobsResp,
    "slurmdb_job" => V0043OpenapiSlurmdbdJobsResp,
    ];
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use slurm_client::v0_0_44::types::*;

    pub(super) const TABLE: &[super::Decoder] = super::table![
    "slurm_ping" => V0044OpenapiPingArrayResp,
    "slurm_diag" => V0044OpenapiDiagResp,
    "slurm_jobs" => V0044OpenapiJobInfoResp,
    "slurm_jobs_state" => V0044OpenapiJobStateResp,
    "slurm_job" => V0044OpenapiJobInfoResp,
    "slurm_job_array" => V0044OpenapiJobInfoResp,
    "slurm_job_unknown" => V0044OpenapiJobInfoResp,
    "slurm_resources" => V0044OpenapiResourceLayoutResp,
    "slurm_nodes" => V0044OpenapiNodesResp,
    "slurm_node" => V0044OpenapiNodesResp,
    "slurm_partitions" => V0044OpenapiPartitionResp,
    "slurm_partition" => V0044OpenapiPartitionResp,
    "slurm_reservations" => V0044OpenapiReservationResp,
    "slurm_reservation" => V0044OpenapiReservationResp,
    "slurm_licenses" => V0044OpenapiLicensesResp,
    "slurm_shares" => V0044OpenapiSharesResp,
    "slurmdb_ping" => V0044OpenapiSlurmdbdPingResp,
    "slurmdb_diag" => V0044OpenapiSlurmdbdStatsResp,
    "slurmdb_config" => V0044OpenapiSlurmdbdConfigResp,
    "slurmdb_accounts" => V0044OpenapiAccountsResp,
    "slurmdb_account" => V0044OpenapiAccountsResp,
    "slurmdb_users" => V0044OpenapiUsersResp,
    "slurmdb_user" => V0044OpenapiUsersResp,
    "slurmdb_associations" => V0044OpenapiAssocsResp,
    "slurmdb_qos" => V0044OpenapiSlurmdbdQosResp,
    "slurmdb_qos_one" => V0044OpenapiSlurmdbdQosResp,
    "slurmdb_tres" => V0044OpenapiTresResp,
    "slurmdb_clusters" => V0044OpenapiClustersResp,
    "slurmdb_cluster" => V0044OpenapiClustersResp,
    "slurmdb_wckeys" => V0044OpenapiWckeyResp,
    "slurmdb_instances" => V0044OpenapiInstancesResp,
    "slurmdb_jobs" => V0044OpenapiSlurmdbdJobsResp,
    "slurmdb_job" => V0044OpenapiSlurmdbdJobsResp,
    ];
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use slurm_client::v0_0_45::types::*;

    pub(super) const TABLE: &[super::Decoder] = super::table![
    "slurm_ping" => V0045OpenapiPingArrayResp,
    "slurm_diag" => V0045OpenapiDiagResp,
    "slurm_jobs" => V0045OpenapiJobInfoResp,
    "slurm_jobs_state" => V0045OpenapiJobStateResp,
    "slurm_job" => V0045OpenapiJobInfoResp,
    "slurm_job_array" => V0045OpenapiJobInfoResp,
    "slurm_job_unknown" => V0045OpenapiJobInfoResp,
    "slurm_resources" => V0045OpenapiResourceLayoutResp,
    "slurm_nodes" => V0045OpenapiNodesResp,
    "slurm_node" => V0045OpenapiNodesResp,
    "slurm_partitions" => V0045OpenapiPartitionResp,
    "slurm_partition" => V0045OpenapiPartitionResp,
    "slurm_reservations" => V0045OpenapiReservationResp,
    "slurm_reservation" => V0045OpenapiReservationResp,
    "slurm_licenses" => V0045OpenapiLicensesResp,
    "slurm_shares" => V0045OpenapiSharesResp,
    "slurm_conf" => V0045OpenapiConfResp,
    "slurmdb_ping" => V0045OpenapiSlurmdbdPingResp,
    "slurmdb_diag" => V0045OpenapiSlurmdbdStatsResp,
    "slurmdb_config" => V0045OpenapiSlurmdbdConfigResp,
    "slurmdb_conf" => V0045OpenapiSlurmdbdConfResp,
    "slurmdb_accounts" => V0045OpenapiAccountsResp,
    "slurmdb_account" => V0045OpenapiAccountsResp,
    "slurmdb_users" => V0045OpenapiUsersResp,
    "slurmdb_user" => V0045OpenapiUsersResp,
    "slurmdb_associations" => V0045OpenapiAssocsResp,
    "slurmdb_qos" => V0045OpenapiSlurmdbdQosResp,
    "slurmdb_qos_one" => V0045OpenapiSlurmdbdQosResp,
    "slurmdb_tres" => V0045OpenapiTresResp,
    "slurmdb_clusters" => V0045OpenapiClustersResp,
    "slurmdb_cluster" => V0045OpenapiClustersResp,
    "slurmdb_wckeys" => V0045OpenapiWckeyResp,
    "slurmdb_instances" => V0045OpenapiInstancesResp,
    "slurmdb_jobs" => V0045OpenapiSlurmdbdJobsResp,
    "slurmdb_job" => V0045OpenapiSlurmdbdJobsResp,
    ];
}
