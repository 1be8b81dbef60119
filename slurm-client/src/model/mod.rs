//! Version-neutral types: what the operations on [`Client`](crate::Client) return and take,
//! the same whichever REST version was negotiated. All are plain data with stable `serde`
//! serialization (field names in `snake_case`, states as Slurm spells them).
//!
//! Conventions:
//! - times are UNIX epoch seconds (`i64`); `None` when Slurm reports none (or `0`);
//! - numbers Slurm may leave unset or set to infinite are [`Limit`]s;
//! - memory is in MiB (Slurm's unit), time limits in minutes;
//! - states keep values this crate does not know as `Other("…")`.

mod accounting;
mod diag;
mod job;
mod job_status;
mod layout;
mod license;
mod node;
mod noval;
mod partition;
mod ping;
mod reservation;
mod share;
mod tres;

pub(crate) use accounting::valid_name;
pub use accounting::{
    Account, AccountSpec, Association, AssociationLimits, AssociationQuery, ClusterRecord,
    JobRecord, JobRecordQuery, Qos, QosLimits, QosSpec, StepRecord, TresRecord, User, UserSpec,
    Wckey,
};
pub use diag::{BackfillStats, Diag, JobCounters, RpcStat, RpcUserStat, SchedulerStats};
pub use job::{
    ArrayInfo, ExitCode, Job, JobFlag, JobList, JobQuery, JobState, JobSubmission, JobUpdate,
    StreamedJobs, SubmittedJob,
};
pub use job_status::JobStatus;
pub use layout::{GresLayout, NodeLayout};
pub use license::License;
pub use node::{Node, NodeFlag, NodeList, NodeQuery, NodeState, NodeStateChange, NodeUpdate};
pub use noval::Limit;
pub(crate) use noval::Wire;
pub use partition::{Partition, PartitionList};
pub use ping::{ControllerPing, Ping};
pub(crate) use reservation::check_name as check_reservation_name;
pub use reservation::{Reservation, ReservationList, ReservationSpec, ReservationUpdate};
pub use share::{Share, Shares, SharesQuery};
pub use tres::Tres;

/// Defines a string enum that keeps unknown values: known variants map to Slurm's spelling,
/// anything else becomes `Other(String)`. Serialized as the string itself.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this crate does not know, as Slurm sent it.
            Other(String),
        }

        impl $name {
            /// Slurm's spelling, e.g. `"PENDING"`.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )+
                    $name::Other(s) => s,
                }
            }

            /// Parses Slurm's spelling (case-insensitive); unknown values become `Other`.
            pub fn parse(text: &str) -> $name {
                $( if text.eq_ignore_ascii_case($text) { return $name::$variant; } )+
                $name::Other(text.to_string())
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok($name::parse(s))
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}
pub(crate) use string_enum;

/// Splits Slurm's state list (`["IDLE", "DRAIN"]`): Slurm sends the base state first and
/// the flags after it. An empty list gives `empty`.
pub(crate) fn split_states<S, F>(
    list: Vec<String>,
    parse_base: impl Fn(&str) -> S,
    parse_flag: impl Fn(&str) -> F,
    empty: S,
) -> (S, Vec<F>) {
    let mut entries = list.into_iter();
    let base = entries.next().map_or(empty, |s| parse_base(&s));
    (base, entries.map(|s| parse_flag(&s)).collect())
}

/// A time from Slurm: `0` and negative values mean "none".
pub(crate) fn epoch(t: Option<i64>) -> Option<i64> {
    t.filter(|t| *t > 0)
}

/// A string from Slurm: empty means "none".
pub(crate) fn text(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}
