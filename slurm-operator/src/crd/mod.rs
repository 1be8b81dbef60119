//! The six Slinky custom resources (`slinky.slurm.net/v1beta1`) as Rust types, and their CRDs.
//!
//! Field names and defaults follow Slinky's Go API; the CRD `default:` values are applied by
//! the API server, and the accessor methods on each spec apply the same defaults in memory
//! (for objects that bypassed the API server, e.g. in tests).

pub mod accounting;
pub mod common;
pub mod controller;
pub mod loginset;
pub mod nodeset;
pub mod null;
mod parity;
pub mod print;
pub mod restapi;
pub mod token;

pub use accounting::{Accounting, AccountingSpec, AccountingStatus, StorageConfig};
pub use common::{
    ContainerWrapper, ExternalConfig, Metadata, MetricEndpoint, Metrics, OpenObject, PodTemplate,
    ServiceMonitor, ServiceSpec, parse_go_duration,
};
pub use controller::{
    Controller, ControllerPersistence, ControllerSpec, ControllerStatus, HighAvailability,
};
pub use loginset::{LoginSet, LoginSetSpec, LoginSetStatus};
pub use nodeset::{
    NodeSet, NodeSetPartition, NodeSetSpec, NodeSetSsh, NodeSetStatus, NodeSetUpdateStrategy,
    PersistentVolumeClaimRetentionPolicy, PruneSlurmNodeRecords, PvcRetention,
    RollingUpdateStrategy, ScalingMode, ScheduledUpdateStrategy, UpdateStrategyType,
};
pub use print::{all, yaml_files};
pub use restapi::{RestApi, RestApiSpec, RestApiStatus};
pub use token::{Token, TokenSpec, TokenStatus};

/// API group of all six kinds.
pub const GROUP: &str = "slinky.slurm.net";
/// The only served and stored version.
pub const VERSION: &str = "v1beta1";
