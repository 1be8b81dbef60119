//! Slurm node state as pod conditions (`SlurmNodeState<X>`, status True, message = the Slurm
//! reason), which external tools read instead of asking Slurm.

use slurm_client::model::{Node, NodeState};

/// Prefix of every Slurm-state pod condition type; stale ones with it are removed.
pub const CONDITION_PREFIX: &str = "SlurmNodeState";

/// Base states in precedence order: a node gets the first one it has.
const BASES: [(&str, &str); 7] = [
    ("ALLOCATED", "Allocated"),
    ("DOWN", "Down"),
    ("ERROR", "Error"),
    ("FUTURE", "Future"),
    ("IDLE", "Idle"),
    ("MIXED", "Mixed"),
    ("UNKNOWN", "Unknown"),
];

/// Flags that become conditions, each independently.
const FLAGS: [(&str, &str); 8] = [
    ("COMPLETING", "Completing"),
    ("DRAIN", "Drain"),
    ("FAIL", "Fail"),
    ("INVALID", "Invalid"),
    ("INVALID_REG", "InvalidReg"),
    ("MAINTENANCE", "Maintenance"),
    ("NOT_RESPONDING", "NotResponding"),
    ("UNDRAIN", "Undrain"),
];

/// One pod condition to set with status `True`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmCondition {
    /// E.g. `SlurmNodeStateIdle`.
    pub type_: String,
    /// The Slurm node's reason, or empty.
    pub message: String,
}

/// The node's base state by precedence (Allocated > Down > Error > Future > Idle > Mixed >
/// Unknown), looking at the base and, in case Slurm listed a base word among the flags, the
/// flags; `None` for a base this list does not know.
pub fn base_state(node: &Node) -> Option<NodeState> {
    base_entry(node).map(|(word, _)| NodeState::parse(word))
}

fn base_entry(node: &Node) -> Option<&'static (&'static str, &'static str)> {
    BASES.iter().find(|(word, _)| {
        node.state.as_str().eq_ignore_ascii_case(word) || node.has_flag_named(word)
    })
}

/// The conditions a pod whose Slurm node is `node` should carry: exactly one base state (if
/// known) then the flags, in a fixed order. `None` (not registered) gives none.
pub fn slurm_conditions(node: Option<&Node>) -> Vec<SlurmCondition> {
    let Some(node) = node else { return Vec::new() };
    let message = node.reason.clone().unwrap_or_default();
    let base = base_entry(node);
    let flags = FLAGS.iter().filter(|(word, _)| node.has_flag_named(word));
    base.into_iter()
        .chain(flags)
        .map(|(_, suffix)| SlurmCondition {
            type_: format!("{CONDITION_PREFIX}{suffix}"),
            message: message.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use slurm_client::model::NodeFlag;

    use super::*;

    fn node(state: &str, flags: &[&str], reason: Option<&str>) -> Node {
        let mut n = Node::default();
        n.state = NodeState::parse(state);
        n.state_flags = flags.iter().map(|f| NodeFlag::parse(f)).collect();
        n.reason = reason.map(str::to_string);
        n
    }

    #[test]
    fn condition_table() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("IDLE", &[], &["Idle"]),
            ("MIXED", &["DRAIN"], &["Mixed", "Drain"]),
            (
                "ALLOCATED",
                &["COMPLETING", "DRAIN"],
                &["Allocated", "Completing", "Drain"],
            ),
            (
                "DOWN",
                &["NOT_RESPONDING", "DRAIN"],
                &["Down", "Drain", "NotResponding"],
            ),
            ("IDLE", &["DRAIN", "UNDRAIN"], &["Idle", "Drain", "Undrain"]),
            (
                "FUTURE",
                &["INVALID", "INVALID_REG"],
                &["Future", "Invalid", "InvalidReg"],
            ),
            (
                "ERROR",
                &["FAIL", "MAINTENANCE"],
                &["Error", "Fail", "Maintenance"],
            ),
            ("UNKNOWN", &["POWERED_DOWN", "CLOUD"], &["Unknown"]),
            // a base word among the flags takes part in the precedence
            ("IDLE", &["ALLOCATED"], &["Allocated"]),
            ("PLANNED", &[], &[]),
        ];
        for (state, flags, want) in cases {
            let n = node(state, flags, Some("why"));
            let got = slurm_conditions(Some(&n));
            let types: Vec<String> = got.iter().map(|c| c.type_.clone()).collect();
            let want: Vec<String> = want.iter().map(|w| format!("SlurmNodeState{w}")).collect();
            assert_eq!(types, want, "{state} {flags:?}");
            assert!(got.iter().all(|c| c.message == "why"));
        }
        assert!(slurm_conditions(None).is_empty());
        assert_eq!(
            slurm_conditions(Some(&node("IDLE", &[], None)))[0].message,
            ""
        );
        assert_eq!(
            base_state(&node("MIXED", &[], None)),
            Some(NodeState::Mixed)
        );
        assert_eq!(base_state(&node("PLANNED", &[], None)), None);
    }
}
