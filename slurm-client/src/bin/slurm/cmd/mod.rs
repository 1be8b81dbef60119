//! One module per top-level command.

pub mod accounting;
pub mod diag;
mod directives;
pub mod get;
pub mod jobs;
pub mod licenses;
pub mod nodes;
pub mod partitions;
pub mod ping;
pub mod reservations;
pub mod token;

use slurm_client::Client;

use crate::config::Connection;
use crate::output::Output;

/// What every command gets: the connection settings and the output format.
#[derive(Debug)]
pub struct Context {
    pub connection: Connection,
    pub output: Output,
}

impl Context {
    /// A client for the configured server (nothing is sent yet).
    pub fn client(&self) -> anyhow::Result<Client> {
        Ok(self.connection.client()?)
    }
}

/// Trackable resources as Slurm writes them: `cpu=4,mem=8G,node=1`.
pub fn tres(tres: &slurm_client::Tres) -> String {
    tres.entries
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
