//! The tests against local Slurm clusters (the workspace's tests, the doc tests, slurm-client's
//! examples, the exporter without slurmdbd). They share nothing with the test ground (the clusters
//! live in network namespaces of their own, their REST proxies on 127.0.0.1:6824 and :6826), so
//! `cargo xtask test` runs them as a lane (`cargo xtask test-slurm`, given the unified build's
//! artifacts) beside the ends of the check lanes.

use std::path::Path;

use anyhow::{Context, Result};

use super::{Timings, status};
use crate::slurm::{self, Release, UpArgs};
use crate::unified::Artifact;

/// The packages whose tests need the Kubernetes test ground (and run in its phases); the others run
/// against the local Slurm clusters.
pub const ON_GROUND: &[&str] = &["xtask", "kube-ground", "slurm-operator", "slurm-bridge"];

/// Test files of those packages that need the local Slurm clusters instead: (package, test).
const ON_SLURM: &[(&str, &str)] = &[("slurm-bridge", "old_slurm"), ("slurm-bridge", "own_jobs")];

pub fn on_slurm(a: &Artifact) -> bool {
    a.kind == "test" && ON_SLURM.contains(&(a.package.as_str(), a.name.as_str()))
}

/// `cargo xtask test-slurm`: the lane, with the artifacts `cargo xtask test` wrote to
/// `artifacts` (JSON) or else from the unified build, printing its own phase timings.
pub fn run(workspace: &Path, artifacts: Option<&Path>, test_args: &[String]) -> Result<()> {
    let built: Vec<Artifact> = match artifacts {
        Some(path) => {
            let raw = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_slice(&raw)
                .with_context(|| format!("{} is not the unified build's list", path.display()))?
        }
        None => crate::unified::everything(workspace)?,
    };
    let mut t = Timings::new(crate::target_dir(workspace));
    let result = phases(&mut t, workspace, &built, test_args);
    let _ = t.phase("stop the Slurm clusters", || {
        for release in Release::ALL {
            slurm::down(release)?;
        }
        Ok(())
    });
    t.print();
    result
}

fn phases(
    t: &mut Timings,
    workspace: &Path,
    built: &[Artifact],
    test_args: &[String],
) -> Result<()> {
    t.phase("start Slurm 24.11 and 26.05 with accounting", || {
        for release in Release::ALL {
            // a cluster left by an interrupted run
            slurm::down(release)?;
            slurm::up(&UpArgs {
                release,
                nodes: 4,
                accounting: true,
                port: None,
            })?;
        }
        Ok(())
    })?;
    let env_files: Vec<String> = Release::ALL
        .iter()
        .map(|r| slurm::state::env_file(*r).display().to_string())
        .collect();
    t.phase("workspace tests against both clusters", || {
        crate::unified::run_tests(
            built,
            |a| (!ON_GROUND.contains(&a.package.as_str()) || on_slurm(a)) && a.runs_by_default,
            test_args,
            &[("SLURM_TEST_ENV_FILES", env_files.join(":"))],
        )?;
        let mut doc = super::cargo(
            workspace,
            &["test", "--doc", "--workspace", "--all-features"],
        );
        doc.env("SLURM_TEST_ENV_FILES", env_files.join(":"));
        status(doc)
    })?;
    t.phase(
        "slurm-client examples against Slurm 24.11 and 26.05",
        || super::examples::run(built, &Release::ALL),
    )?;
    // Many sites run slurmrestd without slurmdbd: the exporter's tests against a 24.11
    // cluster without accounting check that it needs slurmdbd only for the accounting sources.
    t.phase("restart Slurm 24.11 without accounting", || {
        slurm::down(Release::R24_11)?;
        slurm::up(&UpArgs {
            release: Release::R24_11,
            nodes: 4,
            accounting: false,
            port: None,
        })
    })?;
    t.phase("exporter tests without slurmdbd", || {
        crate::unified::run_tests(
            built,
            |a| a.package == "slurm-exporter" && a.runs_by_default,
            test_args,
            &[(
                "SLURM_TEST_ENV_FILES",
                slurm::state::env_file(Release::R24_11)
                    .display()
                    .to_string(),
            )],
        )
    })
}
