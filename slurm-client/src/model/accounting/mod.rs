//! Accounting (slurmdbd, `/slurmdb/`): accounts, users, associations, QoS, clusters, TRES,
//! WCKeys and job history.

mod account;
mod association;
mod cluster;
mod history;
mod qos;

pub(crate) use account::valid_name;
pub use account::{Account, AccountSpec, User, UserSpec};
pub use association::{Association, AssociationLimits, AssociationQuery};
pub use cluster::{ClusterRecord, TresRecord, Wckey};
pub use history::{JobRecord, JobRecordQuery, StepRecord};
pub use qos::{Qos, QosLimits, QosSpec};
