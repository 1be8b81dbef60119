//! Slurm drain and undrain decisions, and who owns a drain.
//!
//! The operator marks every reason it writes with [`REASON_PREFIX`]. A non-empty reason
//! without it was set by someone else (an administrator's `scontrol`, a health checker) and
//! that drain is theirs: the operator never lifts it and never rewrites its reason.

use slurm_client::model::Node;

/// Prefix of every Slurm node reason the operator writes.
pub const REASON_PREFIX: &str = "slurm-operator: ";

/// Upper bound, in characters, of a reason taken from untrusted input.
pub const MAX_REASON_CHARS: usize = 256;

/// Drain a Slurm node with this (full, prefixed) reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drain {
    pub node: String,
    pub reason: String,
}

/// Lift the drain of a Slurm node (state `UNDRAIN`), recording this (full, prefixed) reason;
/// with `resume`, return a node the operator set DOWN to service (state `RESUME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undrain {
    pub node: String,
    pub reason: String,
    pub resume: bool,
}

/// `reason` with the operator's prefix.
pub fn operator_reason(reason: &str) -> String {
    format!("{REASON_PREFIX}{reason}")
}

/// The node's reason is absent or the operator's.
pub fn reason_is_ours(node: &Node) -> bool {
    node.reason
        .as_deref()
        .is_none_or(|r| r.is_empty() || r.starts_with(REASON_PREFIX))
}

/// Makes untrusted text (a Kubernetes node annotation) usable as a reason: tabs and line
/// breaks become spaces, other control characters are dropped, the ends are trimmed and the
/// result is cut to [`MAX_REASON_CHARS`] characters.
pub fn sanitize_reason(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .filter_map(|c| match c {
            '\t' | '\n' | '\r' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect();
    let trimmed = cleaned.trim();
    if trimmed.chars().count() <= MAX_REASON_CHARS {
        return trimmed.to_string();
    }
    trimmed
        .chars()
        .take(MAX_REASON_CHARS)
        .collect::<String>()
        .trim()
        .to_string()
}

/// How a drain treats a reason already on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExistingReason {
    /// Keep any non-empty reason (cordon sync: the first cause stays recorded).
    Keep,
    /// Replace an operator reason with ours, keep a foreign one (scale-in: the pod's removal
    /// is the cause now, but an administrator's reason must survive so their drain stays
    /// theirs and is never lifted).
    ReplaceOurs,
}

/// The drain to send so that `node` is drained for `reason` (unprefixed), or `None` when that
/// drain is already in effect with the same reason.
pub fn drain(node: &Node, reason: &str, existing: ExistingReason) -> Option<Drain> {
    let current = node.reason.as_deref().unwrap_or_default();
    let keep = match existing {
        ExistingReason::Keep => !current.is_empty(),
        ExistingReason::ReplaceOurs => !reason_is_ours(node),
    };
    let reason = if keep {
        current.to_string()
    } else {
        operator_reason(if reason.is_empty() { "unknown" } else { reason })
    };
    if node.is_drain() && current == reason {
        return None;
    }
    Some(Drain {
        node: node.name.clone(),
        reason,
    })
}

/// The undrain to send for `node`, or `None` when it must stay as it is: not drained (or
/// already being undrained), drained by someone else, or down / not responding.
pub fn undrain(node: &Node, reason: &str) -> Option<Undrain> {
    if !node.is_drain() || !reason_is_ours(node) || !may_lift(node) {
        return None;
    }
    Some(Undrain {
        node: node.name.clone(),
        reason: operator_reason(reason),
        resume: false,
    })
}

/// The resume to send for `node`, DOWN with the operator's own reason (the preStop hook of the
/// pod it replaced wrote `Pod is terminating`) while the pod now running there is healthy and
/// slurmd answers: without it the new pod's node would stay DOWN for good. A node DOWN for any
/// other reason, or not responding, is left alone.
pub fn resume(node: &Node, reason: &str) -> Option<Undrain> {
    let down = node.state == slurm_client::model::NodeState::Down;
    if !down || node.is_not_responding() || !reason_is_ours(node) || node.reason.is_none() {
        return None;
    }
    Some(Undrain {
        node: node.name.clone(),
        reason: operator_reason(reason),
        resume: true,
    })
}

/// Slurm state the operator may act on: not down and answering.
fn may_lift(node: &Node) -> bool {
    node.state != slurm_client::model::NodeState::Down && !node.is_not_responding()
}

#[cfg(test)]
mod tests {
    use slurm_client::model::{NodeFlag, NodeState};

    use super::*;

    fn node(state: NodeState, flags: &[&str], reason: Option<&str>) -> Node {
        let mut n = Node::default();
        n.name = "n1".into();
        n.state = state;
        n.state_flags = flags.iter().map(|f| NodeFlag::parse(f)).collect();
        n.reason = reason.map(str::to_string);
        n
    }

    #[test]
    fn sanitize_table() {
        let long = "x".repeat(300);
        let cases: &[(&str, &str)] = &[
            ("  GPU\tfault\nnow\r ", "GPU fault now"),
            ("bell\u{7}less\u{0}", "bellless"),
            ("\u{1b}[31mred", "[31mred"),
            ("", ""),
            (&long, &long[..256]),
            ("ünïcödé ok", "ünïcödé ok"),
        ];
        for (input, want) in cases {
            assert_eq!(sanitize_reason(input), *want, "{input:?}");
        }
        let spaced = format!("{} tail", "y".repeat(255));
        assert_eq!(sanitize_reason(&spaced), "y".repeat(255));
        assert_eq!(sanitize_reason(&"é".repeat(300)).chars().count(), 256);
    }

    #[test]
    fn ownership() {
        assert!(reason_is_ours(&node(NodeState::Idle, &[], None)));
        assert!(reason_is_ours(&node(NodeState::Idle, &[], Some(""))));
        assert!(reason_is_ours(&node(
            NodeState::Idle,
            &[],
            Some("slurm-operator: x")
        )));
        assert!(!reason_is_ours(&node(
            NodeState::Idle,
            &[],
            Some("bad disk")
        )));
        assert!(!reason_is_ours(&node(
            NodeState::Idle,
            &[],
            Some("slurm-operator:x")
        )));
    }

    /// (state, flags, current reason, mode, requested reason) -> sent reason.
    type DrainCase = (
        NodeState,
        &'static [&'static str],
        Option<&'static str>,
        ExistingReason,
        &'static str,
        Option<&'static str>,
    );

    #[test]
    fn drain_table() {
        use ExistingReason::{Keep, ReplaceOurs};
        let ours = "slurm-operator: why";
        let cases: &[DrainCase] = &[
            (NodeState::Idle, &[], None, Keep, "why", Some(ours)),
            (NodeState::Idle, &["DRAIN"], Some(ours), Keep, "why", None),
            (NodeState::Idle, &["DRAIN"], Some(ours), Keep, "other", None),
            (
                NodeState::Idle,
                &["DRAIN", "UNDRAIN"],
                Some(ours),
                Keep,
                "why",
                Some(ours),
            ),
            (NodeState::Idle, &[], Some(ours), Keep, "other", Some(ours)),
            (
                NodeState::Idle,
                &["DRAIN"],
                Some(ours),
                ReplaceOurs,
                "other",
                Some("slurm-operator: other"),
            ),
            (
                NodeState::Mixed,
                &["DRAIN"],
                Some("admin"),
                ReplaceOurs,
                "x",
                None,
            ),
            (
                NodeState::Mixed,
                &[],
                Some("admin"),
                ReplaceOurs,
                "x",
                Some("admin"),
            ),
            (
                NodeState::Idle,
                &[],
                None,
                Keep,
                "",
                Some("slurm-operator: unknown"),
            ),
        ];
        for (state, flags, current, mode, requested, want) in cases {
            let n = node(state.clone(), flags, *current);
            let got = drain(&n, requested, *mode).map(|d| d.reason);
            assert_eq!(
                got.as_deref(),
                *want,
                "{state:?} {flags:?} {current:?} {mode:?}"
            );
        }
    }

    #[test]
    fn undrain_table() {
        let ours = Some("slurm-operator: Pod (ns/p) was cordoned");
        // (state, flags, reason) -> undrain sent
        let cases: &[(NodeState, &[&str], Option<&str>, bool)] = &[
            (NodeState::Idle, &["DRAIN"], ours, true),
            (NodeState::Idle, &["DRAIN"], None, true),
            (NodeState::Idle, &[], ours, false),
            (NodeState::Idle, &["DRAIN", "UNDRAIN"], ours, false),
            (NodeState::Idle, &["DRAIN"], Some("bad disk"), false),
            (NodeState::Down, &["DRAIN"], ours, false),
            (NodeState::Idle, &["DRAIN", "NOT_RESPONDING"], ours, false),
        ];
        for (state, flags, reason, want) in cases {
            let n = node(state.clone(), flags, *reason);
            let got = undrain(&n, "Pod (ns/p) was uncordoned");
            assert_eq!(got.is_some(), *want, "{state:?} {flags:?} {reason:?}");
            if let Some(u) = got {
                assert_eq!(u.reason, "slurm-operator: Pod (ns/p) was uncordoned");
            }
        }
    }
}
