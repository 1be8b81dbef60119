//! Finds the real Slurm clusters integration tests run against.
//!
//! Sources, first match wins:
//! 1. `SLURM_TEST_ENV_FILES=/a/cluster.env:/b/cluster.env` — what `cargo xtask test` sets;
//! 2. `SLURM_TEST_ENV=/path/to/cluster.env` — one cluster env file;
//! 3. `SLURM_REST_URL` and `SLURM_JWT` in the environment — an existing server;
//! 4. every `/run/slurm-dev/*/cluster.env` written by `cargo xtask slurm up`.
//!
//! With none of them the tests fail (they never skip): start a cluster with
//! `cargo xtask slurm up --release 24.11` (or 26.05).

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use slurm_client::{Client, ClientBuilder, StaticToken};

/// Variables read from the process environment in mode 2.
const KNOWN: &[&str] = &[
    "SLURM_REST_URL",
    "SLURM_REST_SOCKET",
    "SLURM_USER_NAME",
    "SLURM_JWT",
    "SLURM_JWT_KEY",
    "SLURM_RELEASE",
    "SLURM_ACCOUNTING",
    "SLURM_TEST_USER",
    "SLURM_TEST_USER_JWT",
];

/// One cluster's settings.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Where the settings came from (file path or "environment").
    pub source: String,
    vars: HashMap<String, String>,
}

impl Cluster {
    /// A setting that must be present.
    pub fn var(&self, key: &str) -> &str {
        self.opt(key).unwrap_or_else(|| {
            panic!(
                "cluster {} has no {key}; clusters started with `cargo xtask slurm up` set it",
                self.source
            )
        })
    }

    /// A setting that may be missing.
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

    /// A builder with the cluster's URL, root token and user name.
    pub fn builder(&self) -> ClientBuilder {
        ClientBuilder::new(self.url())
            .token(StaticToken::new(self.jwt().to_string()))
            .user_name(self.user())
    }

    pub fn client(&self) -> Client {
        self.builder().build().expect("client for test cluster")
    }
}

/// Every cluster to test against; panics with instructions when there is none.
pub fn clusters() -> Vec<Cluster> {
    if let Ok(paths) = std::env::var("SLURM_TEST_ENV_FILES") {
        let found: Vec<Cluster> = paths
            .split(':')
            .filter(|p| !p.is_empty())
            .map(|p| load(Path::new(p)))
            .collect();
        assert!(
            !found.is_empty(),
            "SLURM_TEST_ENV_FILES is set but names no file"
        );
        return found;
    }
    if let Ok(path) = std::env::var("SLURM_TEST_ENV") {
        return vec![load(Path::new(&path))];
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
        .map(|p| load(&p))
        .collect();
    found.sort_by(|a, b| a.source.cmp(&b.source));
    if found.is_empty() {
        panic!(
            "no Slurm cluster for integration tests: start one with \
             `cargo xtask slurm up --release 24.11` (writes /run/slurm-dev/<release>/cluster.env), \
             or set SLURM_TEST_ENV=/path/to/cluster.env (SLURM_TEST_ENV_FILES for several, \
             separated by `:`), or SLURM_REST_URL and SLURM_JWT"
        );
    }
    found
}

/// Reads shell-style `KEY=value` lines (optional `export`, optional quotes, `#` comments).
fn load(path: &Path) -> Cluster {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read cluster env file {}: {e}", path.display()));
    let vars = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("export ").unwrap_or(l).split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            (k.trim().to_string(), v.to_string())
        })
        .collect();
    Cluster {
        source: path.display().to_string(),
        vars,
    }
}
