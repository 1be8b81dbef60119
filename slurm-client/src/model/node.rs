//! Compute nodes: state, resources, and the changes an administrator makes to them.

use serde::Serialize;

use super::{Limit, Tres, string_enum};

string_enum! {
    /// A node's base state (the first entry of Slurm's `state` list).
    #[derive(Default)]
    NodeState {
        /// Up, no jobs.
        Idle = "IDLE",
        /// Some CPUs allocated, some idle.
        Mixed = "MIXED",
        /// Fully allocated.
        Allocated = "ALLOCATED",
        /// Down: not usable.
        Down = "DOWN",
        /// Error state.
        Error = "ERROR",
        /// Defined for the future, not yet present.
        Future = "FUTURE",
        /// State not known yet (e.g. slurmd never registered).
        #[default]
        Unknown = "UNKNOWN",
    }
}

string_enum! {
    /// A flag next to a node's base state (the later entries of Slurm's `state` list).
    NodeFlag {
        /// Draining or drained: no new jobs.
        Drain = "DRAIN",
        /// In a maintenance reservation.
        Maintenance = "MAINTENANCE",
        /// slurmd does not answer.
        NotResponding = "NOT_RESPONDING",
        /// Jobs on it are completing.
        Completing = "COMPLETING",
        /// Failing: no new jobs, administrator attention needed.
        Fail = "FAIL",
        /// Powered down (power saving).
        PoweredDown = "POWERED_DOWN",
        /// Powering down.
        PoweringDown = "POWERING_DOWN",
        /// Power down requested.
        PowerDown = "POWER_DOWN",
        /// Powering up.
        PoweringUp = "POWERING_UP",
        /// A reboot was requested.
        RebootRequested = "REBOOT_REQUESTED",
        /// A reboot was issued.
        RebootIssued = "REBOOT_ISSUED",
        /// In an advanced reservation.
        Reserved = "RESERVED",
        /// Planned by the backfill scheduler for a pending job.
        Planned = "PLANNED",
        /// A cloud node.
        Cloud = "CLOUD",
        /// A dynamic node.
        DynamicNorm = "DYNAMIC_NORM",
        /// A dynamic future node.
        DynamicFuture = "DYNAMIC_FUTURE",
        /// Registered with an invalid configuration.
        InvalidReg = "INVALID_REG",
    }
}

/// A compute node (`scontrol show node`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Node {
    /// Node name, e.g. `node1`.
    pub name: String,
    /// Host name.
    pub hostname: Option<String>,
    /// Address slurmctld reaches it at.
    pub address: Option<String>,
    /// Base state.
    pub state: NodeState,
    /// Flags next to the base state (`DRAIN`, `NOT_RESPONDING`, …).
    pub state_flags: Vec<NodeFlag>,
    /// Why it is drained or down.
    pub reason: Option<String>,
    /// Who set the reason.
    pub reason_set_by: Option<String>,
    /// When the reason was set.
    pub reason_changed_at: Option<i64>,
    /// Configured CPUs.
    pub cpus: u32,
    /// Allocated CPUs.
    pub cpus_allocated: u32,
    /// Idle CPUs.
    pub cpus_idle: u32,
    /// Load average × 100, as slurmd reports it.
    pub cpu_load: Option<u32>,
    /// Sockets.
    pub sockets: Option<u32>,
    /// Cores per socket.
    pub cores_per_socket: Option<u32>,
    /// Threads per core.
    pub threads_per_core: Option<u32>,
    /// Configured memory in MiB (`RealMemory`).
    pub memory_mb: u64,
    /// Allocated memory in MiB.
    pub memory_allocated_mb: u64,
    /// Free memory in MiB as the OS reports it.
    pub memory_free_mb: Limit<u64>,
    /// Configured GRES, e.g. `"gpu:2"`.
    pub gres: Option<String>,
    /// GRES in use, e.g. `"gpu:1"` or `"gpu:a100:1(IDX:0)"`.
    pub gres_used: Option<String>,
    /// Configured trackable resources.
    pub tres: Tres,
    /// Allocated trackable resources.
    pub tres_used: Tres,
    /// Configured features.
    pub features: Vec<String>,
    /// Active features.
    pub active_features: Vec<String>,
    /// Partitions it belongs to.
    pub partitions: Vec<String>,
    /// Reservation it is in, if any.
    pub reservation: Option<String>,
    /// Scheduling weight.
    pub weight: Option<u32>,
    /// Comment.
    pub comment: Option<String>,
    /// Extra data (arbitrary string).
    pub extra: Option<String>,
    /// Boot time.
    pub boot_time: Option<i64>,
    /// When slurmd started.
    pub slurmd_start_time: Option<i64>,
    /// When it was last busy.
    pub last_busy: Option<i64>,
    /// slurmd's Slurm version.
    pub version: Option<String>,
    /// Architecture, e.g. `x86_64`.
    pub architecture: Option<String>,
    /// Operating system.
    pub operating_system: Option<String>,
    /// Its place in a dynamic topology (`topo-switch:s1,topo-block:b1`); REST v0.0.43+.
    pub topology: Option<String>,
}

impl Node {
    /// Whether the state carries `flag`.
    pub fn has_flag(&self, flag: &NodeFlag) -> bool {
        self.state_flags.contains(flag)
    }

    /// Drained or draining (no new jobs).
    pub fn is_draining(&self) -> bool {
        self.has_flag(&NodeFlag::Drain)
    }

    /// Drained with no jobs left (`DRAINED` in `sinfo`).
    pub fn is_drained(&self) -> bool {
        self.is_draining() && matches!(self.state, NodeState::Idle | NodeState::Down)
    }

    /// Whether it can take jobs: not down, drained, failing or unresponsive.
    pub fn is_available(&self) -> bool {
        !matches!(
            self.state,
            NodeState::Down | NodeState::Error | NodeState::Future
        ) && !self.state_flags.iter().any(|f| {
            matches!(
                f,
                NodeFlag::Drain | NodeFlag::Fail | NodeFlag::NotResponding | NodeFlag::PoweredDown
            )
        })
    }

    /// Whether the state carries a flag by Slurm's spelling (case-insensitive), including the
    /// flags this crate has no variant for and keeps as [`NodeFlag::Other`] (`UNDRAIN`,
    /// `INVALID`, …).
    pub fn has_flag_named(&self, name: &str) -> bool {
        self.state_flags
            .iter()
            .any(|f| f.as_str().eq_ignore_ascii_case(name))
    }

    /// Work is happening on it: jobs allocated (`ALLOCATED`, `MIXED`) or finishing
    /// (`COMPLETING`, which covers epilogs).
    pub fn is_busy(&self) -> bool {
        matches!(self.state, NodeState::Allocated | NodeState::Mixed)
            || self.has_flag(&NodeFlag::Completing)
    }

    /// An undrain was requested (`UNDRAIN` flag): the drain is being lifted.
    pub fn is_undrain(&self) -> bool {
        self.has_flag_named("UNDRAIN")
    }

    /// A drain is in effect: `DRAIN` set and not being lifted (no `UNDRAIN`). The node may
    /// still be running jobs; see [`Node::is_drained_idle`].
    pub fn is_drain(&self) -> bool {
        self.is_draining() && !self.is_undrain()
    }

    /// Drained and empty, whatever the base state: a drain is in effect ([`Node::is_drain`])
    /// and nothing runs there ([`Node::is_busy`]) — the point where its host can be removed
    /// without killing work. Unlike [`Node::is_drained`] this also holds for `UNKNOWN`,
    /// `FUTURE` or `ERROR` nodes and fails while `UNDRAIN` is set.
    pub fn is_drained_idle(&self) -> bool {
        self.is_drain() && !self.is_busy()
    }

    /// slurmd does not answer (`NOT_RESPONDING` flag).
    pub fn is_not_responding(&self) -> bool {
        self.has_flag(&NodeFlag::NotResponding)
    }

    /// Set `DOWN` by slurmctld because slurmd stopped answering: base state `DOWN` with a
    /// reason mentioning `Not responding` (what slurmctld writes) or the `NOT_RESPONDING` flag.
    pub fn is_down_not_responding(&self) -> bool {
        self.state == NodeState::Down
            && (self.is_not_responding()
                || self
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.contains("Not responding")))
    }

    /// GPUs configured (from `tres`, else from `gres`).
    pub fn gpus(&self) -> u64 {
        match self.tres.gpus() {
            0 => gres_gpus(self.gres.as_deref()),
            n => n,
        }
    }

    /// GPUs in use (from `tres_used`, else from `gres_used`).
    pub fn gpus_used(&self) -> u64 {
        match self.tres_used.gpus() {
            0 => gres_gpus(self.gres_used.as_deref()),
            n => n,
        }
    }
}

/// Counts GPUs in a GRES string such as `gpu:2`, `gpu:a100:2(S:0-1)` or `gpu:a100:1(IDX:0),gpu:v100:1(IDX:1)`.
fn gres_gpus(gres: Option<&str>) -> u64 {
    let Some(gres) = gres else { return 0 };
    let mut total = 0;
    let mut depth = 0;
    let mut start = 0;
    let mut entries = Vec::new();
    for (i, c) in gres.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(&gres[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(&gres[start..]);
    for entry in entries {
        let entry = entry.split('(').next().unwrap_or_default();
        let mut parts = entry.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        if let Some(n) = parts.next_back().and_then(|n| n.parse::<u64>().ok()) {
            total += n;
        }
    }
    total
}

/// The answer to a node listing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct NodeList {
    /// The nodes (all of them).
    pub nodes: Vec<Node>,
    /// When slurmctld produced the list; pass it as [`NodeQuery::update_time`] next time.
    pub last_update: Option<i64>,
    /// True when [`NodeQuery::update_time`] was given and nothing changed since (slurmrestd
    /// answers HTTP 304): `nodes` is then empty.
    pub unchanged: bool,
}

/// Options for [`Client::list_nodes`](crate::Client::list_nodes).
///
/// ```
/// use slurm_client::NodeQuery;
/// let query = NodeQuery::new().all(true).update_time(1_700_000_000);
/// assert!(query.all);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NodeQuery {
    /// Only answer if something changed since this time (epoch seconds).
    pub update_time: Option<i64>,
    /// Include hidden nodes and those of hidden partitions (`flags=ALL`).
    pub all: bool,
}

impl NodeQuery {
    /// A query for every (visible) node.
    pub fn new() -> NodeQuery {
        NodeQuery::default()
    }

    /// Sets [`NodeQuery::update_time`].
    pub fn update_time(mut self, time: i64) -> NodeQuery {
        self.update_time = Some(time);
        self
    }

    /// Sets [`NodeQuery::all`]: include hidden nodes.
    pub fn all(mut self, all: bool) -> NodeQuery {
        self.all = all;
        self
    }
}

/// A state change an administrator asks for (`scontrol update node state=…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum NodeStateChange {
    /// No new jobs; running jobs finish (`DRAIN`, needs a reason).
    Drain,
    /// Back to service (`RESUME`): clears DRAIN, DOWN, FAIL.
    Resume,
    /// Down now (`DOWN`, needs a reason); its jobs are killed.
    Down,
    /// Clears DRAIN only (`UNDRAIN`).
    Undrain,
    /// Failing (`FAIL`, needs a reason).
    Fail,
    /// Power down (`POWER_DOWN`).
    PowerDown,
    /// Power up (`POWER_UP`).
    PowerUp,
    /// Any other state word Slurm accepts.
    Other(String),
}

impl NodeStateChange {
    /// Slurm's word for it, e.g. `"DRAIN"`.
    pub fn as_str(&self) -> &str {
        match self {
            NodeStateChange::Drain => "DRAIN",
            NodeStateChange::Resume => "RESUME",
            NodeStateChange::Down => "DOWN",
            NodeStateChange::Undrain => "UNDRAIN",
            NodeStateChange::Fail => "FAIL",
            NodeStateChange::PowerDown => "POWER_DOWN",
            NodeStateChange::PowerUp => "POWER_UP",
            NodeStateChange::Other(s) => s,
        }
    }

    /// Whether Slurm requires a reason with it.
    pub fn needs_reason(&self) -> bool {
        matches!(
            self,
            NodeStateChange::Drain | NodeStateChange::Down | NodeStateChange::Fail
        )
    }
}

/// Changes to a node (`scontrol update node`); unset fields stay as they are.
///
/// Start from [`NodeUpdate::new`] (or [`NodeUpdate::state`] for a state change) and chain
/// the setters.
///
/// ```
/// use slurm_client::{NodeStateChange, NodeUpdate};
/// let update = NodeUpdate::state(NodeStateChange::Drain, Some("bad disk")).comment("ticket 12");
/// assert_eq!(update.comment.as_deref(), Some("ticket 12"));
/// let update = NodeUpdate::new().features(["gpu", "ib"]).weight(10);
/// assert_eq!(update.weight, Some(10));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NodeUpdate {
    /// New state.
    pub state: Option<NodeStateChange>,
    /// Reason (required with DRAIN, DOWN and FAIL).
    pub reason: Option<String>,
    /// New configured features (replaces the list).
    pub features: Option<Vec<String>>,
    /// New active features (replaces the list).
    pub active_features: Option<Vec<String>>,
    /// New comment.
    pub comment: Option<String>,
    /// New extra data.
    pub extra: Option<String>,
    /// New scheduling weight.
    pub weight: Option<u32>,
    /// New place in a dynamic topology (`scontrol update topology=…`; "" takes it out);
    /// REST v0.0.43+.
    pub topology: Option<String>,
}

impl NodeUpdate {
    /// An update that changes nothing yet (the same as [`NodeUpdate::default`]).
    pub fn new() -> NodeUpdate {
        NodeUpdate::default()
    }

    /// A state change with a reason.
    pub fn state(state: NodeStateChange, reason: Option<&str>) -> NodeUpdate {
        NodeUpdate {
            state: Some(state),
            reason: reason.map(str::to_string),
            ..NodeUpdate::default()
        }
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: impl Into<String>) -> NodeUpdate {
        self.reason = Some(reason.into());
        self
    }

    /// Sets the configured features (replaces the list).
    pub fn features<I, S>(mut self, features: I) -> NodeUpdate
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.features = Some(features.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the active features (replaces the list).
    pub fn active_features<I, S>(mut self, features: I) -> NodeUpdate
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.active_features = Some(features.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the comment.
    pub fn comment(mut self, comment: impl Into<String>) -> NodeUpdate {
        self.comment = Some(comment.into());
        self
    }

    /// Sets the extra data.
    pub fn extra(mut self, extra: impl Into<String>) -> NodeUpdate {
        self.extra = Some(extra.into());
        self
    }

    /// Sets the scheduling weight.
    pub fn weight(mut self, weight: u32) -> NodeUpdate {
        self.weight = Some(weight);
        self
    }

    /// Sets the place in a dynamic topology (`""` takes the node out); REST v0.0.43+.
    pub fn topology(mut self, topology: impl Into<String>) -> NodeUpdate {
        self.topology = Some(topology.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if *self == NodeUpdate::default() {
            return Err("the node update changes nothing".into());
        }
        if let Some(state) = &self.state {
            if state.needs_reason() && self.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                return Err(format!("node state {} needs a reason", state.as_str()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_strings_count_gpus() {
        assert_eq!(gres_gpus(Some("gpu:2")), 2);
        assert_eq!(gres_gpus(Some("gpu:a100:1(IDX:0),gpu:v100:2(IDX:1-2)")), 3);
        assert_eq!(gres_gpus(Some("gpu:0")), 0);
        assert_eq!(gres_gpus(Some("(null)")), 0);
        assert_eq!(gres_gpus(None), 0);
    }

    #[test]
    fn availability_from_flags() {
        let mut node = Node {
            state: NodeState::Idle,
            ..Node::default()
        };
        assert!(node.is_available());
        node.state_flags.push(NodeFlag::Drain);
        assert!(!node.is_available() && node.is_drained());
        node.state = NodeState::Mixed;
        assert!(node.is_draining() && !node.is_drained());
    }

    #[test]
    fn busy_drain_and_responsiveness_predicates() {
        fn node(state: NodeState, flags: &[&str], reason: Option<&str>) -> Node {
            Node {
                state,
                state_flags: flags.iter().map(|f| NodeFlag::parse(f)).collect(),
                reason: reason.map(str::to_string),
                ..Node::default()
            }
        }
        // (state, flags, reason) -> (busy, drain, drained_idle, down_not_responding)
        type Case = (
            NodeState,
            &'static [&'static str],
            Option<&'static str>,
            [bool; 4],
        );
        let cases: &[Case] = &[
            (NodeState::Idle, &[], None, [false, false, false, false]),
            (NodeState::Allocated, &[], None, [true, false, false, false]),
            (
                NodeState::Mixed,
                &["DRAIN"],
                None,
                [true, true, false, false],
            ),
            (
                NodeState::Idle,
                &["COMPLETING", "DRAIN"],
                None,
                [true, true, false, false],
            ),
            (
                NodeState::Idle,
                &["DRAIN"],
                None,
                [false, true, true, false],
            ),
            (
                NodeState::Idle,
                &["DRAIN", "UNDRAIN"],
                None,
                [false, false, false, false],
            ),
            (
                NodeState::Unknown,
                &["DRAIN"],
                None,
                [false, true, true, false],
            ),
            (
                NodeState::Down,
                &["DRAIN"],
                None,
                [false, true, true, false],
            ),
            (
                NodeState::Down,
                &["NOT_RESPONDING"],
                None,
                [false, false, false, true],
            ),
            (
                NodeState::Down,
                &[],
                Some("Not responding"),
                [false, false, false, true],
            ),
            (
                NodeState::Idle,
                &["NOT_RESPONDING"],
                None,
                [false, false, false, false],
            ),
        ];
        for (state, flags, reason, want) in cases {
            let n = node(state.clone(), flags, *reason);
            let got = [
                n.is_busy(),
                n.is_drain(),
                n.is_drained_idle(),
                n.is_down_not_responding(),
            ];
            assert_eq!(got, *want, "{state:?} {flags:?} {reason:?}");
        }
        let n = node(NodeState::Idle, &["undrain", "INVALID"], None);
        assert!(n.is_undrain() && n.has_flag_named("invalid") && !n.has_flag_named("DRAIN"));
    }

    #[test]
    fn drain_needs_reason() {
        assert!(
            NodeUpdate::state(NodeStateChange::Drain, None)
                .validate()
                .is_err()
        );
        assert!(
            NodeUpdate::state(NodeStateChange::Drain, Some("bad disk"))
                .validate()
                .is_ok()
        );
        assert!(
            NodeUpdate::state(NodeStateChange::Resume, None)
                .validate()
                .is_ok()
        );
        assert!(NodeUpdate::default().validate().is_err());
    }
}
