//! Finds the real Slurm clusters integration tests run against.
//!
//! Sources, first match wins:
//! 1. `SLURM_TEST_ENV_FILES=/a/cluster.env:/b/cluster.env` — what `cargo xtask test` sets;
//! 2. `SLURM_TEST_ENV=/path/to/cluster.env` — one cluster env file;
//! 3. `SLURM_REST_URL` and `SLURM_JWT` in the environment — an existing server;
//! 4. every `/run/slurm-dev/*/cluster.env` written by `cargo xtask slurm up`.
//!
//! With none of them the tests fail (they never skip).

use std::collections::HashMap;
use std::path::Path;

use crate::env_file::read_env_file;

/// Variables read from the process environment in mode 3.
const KNOWN: &[&str] = &[
    "SLURM_REST_URL",
    "SLURM_REST_SOCKET",
    "SLURM_USER_NAME",
    "SLURM_JWT",
    "SLURM_JWT_KEY",
    "SLURM_RELEASE",
    "SLURM_ACCOUNTING",
    "SLURM_CLUSTER_NAME",
    "SLURM_NODES",
    "SLURM_TEST_USER",
    "SLURM_TEST_USER_JWT",
];

/// One cluster's settings.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Where the settings came from (file path or "environment").
    pub source: String,
    pub vars: HashMap<String, String>,
}

impl Cluster {
    /// The settings in the env file at `path`.
    pub fn load(path: &Path) -> Cluster {
        Cluster {
            source: path.display().to_string(),
            vars: read_env_file(path),
        }
    }

    /// A setting that must be present.
    pub fn var(&self, key: &str) -> &str {
        self.opt(key).unwrap_or_else(|| {
            panic!(
                "cluster {} has no {key}; clusters started with `cargo xtask slurm up` set it",
                self.source
            )
        })
    }

    /// A setting that may be missing (an empty one is missing).
    pub fn opt(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn url(&self) -> &str {
        self.var("SLURM_REST_URL")
    }

    pub fn jwt(&self) -> &str {
        self.var("SLURM_JWT")
    }

    pub fn user(&self) -> &str {
        self.opt("SLURM_USER_NAME").unwrap_or("root")
    }

    /// `24.11`, `26.05`, … when known.
    pub fn release(&self) -> Option<&str> {
        self.opt("SLURM_RELEASE")
    }

    pub fn has_accounting(&self) -> bool {
        self.opt("SLURM_ACCOUNTING") == Some("1")
    }
}

/// Every cluster to test against; panics with instructions when there is none.
pub fn clusters() -> Vec<Cluster> {
    if let Ok(paths) = std::env::var("SLURM_TEST_ENV_FILES") {
        let found: Vec<Cluster> = paths
            .split(':')
            .filter(|p| !p.is_empty())
            .map(|p| Cluster::load(Path::new(p)))
            .collect();
        assert!(
            !found.is_empty(),
            "SLURM_TEST_ENV_FILES is set but names no file"
        );
        return found;
    }
    if let Ok(path) = std::env::var("SLURM_TEST_ENV") {
        return vec![Cluster::load(Path::new(&path))];
    }
    if let (Ok(_), Ok(_)) = (std::env::var("SLURM_REST_URL"), std::env::var("SLURM_JWT")) {
        let vars = KNOWN
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        return vec![Cluster {
            source: "environment".into(),
            vars,
        }];
    }
    let mut found: Vec<Cluster> = std::fs::read_dir("/run/slurm-dev")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("cluster.env"))
        .filter(|p| p.is_file())
        .map(|p| Cluster::load(&p))
        .collect();
    found.sort_by(|a, b| a.source.cmp(&b.source));
    assert!(
        !found.is_empty(),
        "no Slurm cluster for integration tests: start one with \
         `cargo xtask slurm up --release 24.11 --accounting` (writes \
         /run/slurm-dev/<release>/cluster.env), or set SLURM_TEST_ENV=/path/to/cluster.env \
         (SLURM_TEST_ENV_FILES for several, separated by `:`), or SLURM_REST_URL and SLURM_JWT"
    );
    found
}
