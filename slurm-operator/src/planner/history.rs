//! A NodeSet's ControllerRevisions, as Kubernetes keeps a StatefulSet's history: one revision per
//! pod template the NodeSet has had (named `<nodeset>-<controller-revision-hash>`, numbered in
//! the order they became current), the current one made when missing, a template that comes
//! back renumbered as the newest, and the old ones deleted beyond `revisionHistoryLimit` unless
//! a pod still carries their hash.

use std::collections::BTreeSet;

/// An existing revision, as far as the decision needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub name: String,
    /// Its `controller-revision-hash` label.
    pub hash: String,
    pub revision: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryAction {
    /// Make the revision of the current template.
    Create {
        name: String,
        revision: i64,
    },
    /// The current template had a revision before: it becomes the newest again.
    Renumber {
        name: String,
        revision: i64,
    },
    Delete {
        name: String,
    },
}

/// `<nodeset>-<hash>`: the name Kubernetes gives a controller's revisions.
pub fn revision_name(nodeset: &str, hash: &str) -> String {
    format!("{nodeset}-{hash}")
}

/// What to change so that `existing` holds the current template (`hash`) as its newest
/// revision and at most `limit` older ones that no pod uses (`pod_hashes`).
pub fn history_actions(
    nodeset: &str,
    existing: &[Revision],
    hash: &str,
    pod_hashes: &BTreeSet<String>,
    limit: i32,
) -> Vec<HistoryAction> {
    let newest = existing.iter().map(|r| r.revision).max().unwrap_or(0);
    let mut actions = Vec::new();
    match existing.iter().find(|r| r.hash == hash) {
        None => actions.push(HistoryAction::Create {
            name: revision_name(nodeset, hash),
            revision: newest + 1,
        }),
        Some(r) if r.revision < newest => actions.push(HistoryAction::Renumber {
            name: r.name.clone(),
            revision: newest + 1,
        }),
        Some(_) => {}
    }
    let mut old: Vec<&Revision> = existing
        .iter()
        .filter(|r| r.hash != hash && !pod_hashes.contains(&r.hash))
        .collect();
    old.sort_by_key(|r| r.revision);
    let excess = old.len().saturating_sub(limit.max(0) as usize);
    actions.extend(old.into_iter().take(excess).map(|r| HistoryAction::Delete {
        name: r.name.clone(),
    }));
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(hash: &str, revision: i64) -> Revision {
        Revision {
            name: revision_name("w", hash),
            hash: hash.into(),
            revision,
        }
    }

    fn hashes(h: &[&str]) -> BTreeSet<String> {
        h.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn first_revision_is_made() {
        assert_eq!(
            history_actions("w", &[], "aaa", &hashes(&[]), 0),
            [HistoryAction::Create {
                name: "w-aaa".into(),
                revision: 1
            }]
        );
    }

    #[test]
    fn steady_state_changes_nothing() {
        let existing = [rev("aaa", 1)];
        assert!(history_actions("w", &existing, "aaa", &hashes(&["aaa"]), 0).is_empty());
    }

    #[test]
    fn a_new_template_keeps_the_old_revision_while_pods_use_it() {
        let existing = [rev("aaa", 1)];
        assert_eq!(
            history_actions("w", &existing, "bbb", &hashes(&["aaa"]), 0),
            [HistoryAction::Create {
                name: "w-bbb".into(),
                revision: 2
            }]
        );
        // The rollout is over: no pod has the old hash, the limit is 0.
        let existing = [rev("aaa", 1), rev("bbb", 2)];
        assert_eq!(
            history_actions("w", &existing, "bbb", &hashes(&["bbb"]), 0),
            [HistoryAction::Delete {
                name: "w-aaa".into()
            }]
        );
    }

    #[test]
    fn the_limit_keeps_the_newest_old_revisions() {
        let existing = [rev("a", 1), rev("b", 2), rev("c", 3), rev("d", 4)];
        assert_eq!(
            history_actions("w", &existing, "d", &hashes(&["d"]), 2),
            [HistoryAction::Delete { name: "w-a".into() }]
        );
    }

    #[test]
    fn a_template_that_comes_back_is_renumbered() {
        let existing = [rev("a", 1), rev("b", 2)];
        assert_eq!(
            history_actions("w", &existing, "a", &hashes(&["b"]), 5),
            [HistoryAction::Renumber {
                name: "w-a".into(),
                revision: 3
            }]
        );
    }
}
