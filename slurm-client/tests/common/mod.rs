//! Finds the real Slurm clusters integration tests run against (see `test-support` for
//! where they come from: `SLURM_TEST_ENV_FILES`, `SLURM_TEST_ENV`, `SLURM_REST_URL` with
//! `SLURM_JWT`, or `/run/slurm-dev/*/cluster.env`; with none the tests fail, they never
//! skip), and the loopback server of the failure tests.

#![allow(dead_code, unused_imports)] // each test binary uses a part

pub mod loopback;

use slurm_client::{Client, ClientBuilder, StaticToken};
pub use test_support::{Cluster, clusters};

/// Clients for a test cluster, as root.
pub trait ClusterClient {
    /// A builder with the cluster's URL, root token and user name.
    fn builder(&self) -> ClientBuilder;

    fn client(&self) -> Client {
        self.builder().build().expect("client for test cluster")
    }
}

impl ClusterClient for Cluster {
    fn builder(&self) -> ClientBuilder {
        ClientBuilder::new(self.url())
            .token(StaticToken::new(self.jwt().to_string()))
            .user_name(self.user())
    }
}
