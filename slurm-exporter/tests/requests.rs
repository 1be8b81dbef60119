//! What the exporter asks slurmrestd, counted from its client's debug log.

use crate::common;

use common::{Exporter, clusters};

/// Paths of the requests slurmrestd answered, as the exporter logged them.
fn answered_paths(exporter: &Exporter) -> Vec<String> {
    exporter
        .logs()
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v["message"] == "slurmrestd answered")
        .filter_map(|v| v["path"].as_str().map(String::from))
        .collect()
}

#[tokio::test]
async fn jobs_and_partitions_share_one_partition_listing_per_collection() {
    let c = clusters().remove(0);
    // One collection: both sources need the partitions (jobs for the partitions without
    // jobs, as its first listing is a full one).
    let exporter = Exporter::start(
        &c.exporter_env(),
        &[
            "--sources",
            "jobs,partitions",
            "--interval",
            "1h",
            "--log",
            "info,slurm_client::transport=debug",
        ],
    );
    exporter.wait_ready().await;
    let m = exporter.scrape().await;
    assert!(
        !m.find("slurm_partition_jobs", &[]).is_empty(),
        "the jobs source reported no partition: {}",
        m.text
    );
    assert!(
        m.get("slurm_partition_up", &[("partition", "debug")])
            .is_some()
    );
    let paths = answered_paths(&exporter);
    let listings = paths.iter().filter(|p| p.ends_with("/partitions/")).count();
    assert_eq!(
        listings, 1,
        "partition listings in one collection: {paths:?}"
    );
}
