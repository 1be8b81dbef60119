//! Finds the real Slurm clusters integration tests run against (see `test-support` for
//! where they come from: `SLURM_TEST_ENV_FILES`, `SLURM_TEST_ENV`, `SLURM_REST_URL` with
//! `SLURM_JWT`, or `/run/slurm-dev/*/cluster.env`; with none the tests fail, they never
//! skip), and the loopback server of the failure tests.

#![allow(dead_code)]

pub mod loopback;

use std::ops::Deref;

use slurm_client::{Client, ClientBuilder, StaticToken};

/// One cluster's settings (`source`, `var`, `opt`, `url`, `jwt`, `release`, … of
/// [`test_support::Cluster`]) and clients for it.
#[derive(Debug, Clone)]
pub struct Cluster(test_support::Cluster);

impl Deref for Cluster {
    type Target = test_support::Cluster;

    fn deref(&self) -> &test_support::Cluster {
        &self.0
    }
}

impl Cluster {
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
    test_support::clusters().into_iter().map(Cluster).collect()
}
