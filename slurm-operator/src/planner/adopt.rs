//! A NodeSet whose pods another operator made (Slinky's, from the same custom resource): which
//! revision is current, and which pods a rolling update would restart only because another
//! operator made them.
//!
//! Kubernetes' own history does the same when a template comes back: a revision whose data
//! equals the current template's is reused, whoever named it. So pods of another operator's
//! revision of the current template are up to date and stay; pods of another operator's revision
//! of an older template are out of date, but replacing them is a restart the user did not ask
//! this operator for, so the reconciler holds them until it may (`slurm-rs/adopt: restart`).

use std::collections::BTreeSet;

use serde_json::Value;

/// A ControllerRevision of the NodeSet, as far as the choice needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionInfo {
    /// Its `controller-revision-hash` label.
    pub hash: String,
    pub revision: i64,
    /// Made by this operator (its hash is this operator's hash of its data).
    pub ours: bool,
    /// Its data is the current template's ([`same_template`]).
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionChoice {
    /// The hash pods must carry to be up to date.
    pub update_revision: String,
    /// Hashes of pods that another operator made from another template.
    pub foreign_outdated: BTreeSet<String>,
}

/// The update revision: this operator's `hash` when it has that revision (or no other one holds
/// the current template), else the newest revision of another operator that holds it.
pub fn choose(
    revisions: &[RevisionInfo],
    hash: &str,
    pod_hashes: &BTreeSet<String>,
) -> RevisionChoice {
    let update_revision = if revisions.iter().any(|r| r.hash == hash) {
        hash.to_owned()
    } else {
        revisions
            .iter()
            .filter(|r| !r.ours && r.current)
            .max_by_key(|r| r.revision)
            .map_or_else(|| hash.to_owned(), |r| r.hash.clone())
    };
    let ours: BTreeSet<&str> = revisions
        .iter()
        .filter(|r| r.ours)
        .map(|r| r.hash.as_str())
        .collect();
    let foreign_outdated = pod_hashes
        .iter()
        .filter(|h| **h != update_revision && **h != hash && !ours.contains(h.as_str()))
        .cloned()
        .collect();
    RevisionChoice {
        update_revision,
        foreign_outdated,
    }
}

/// Whether two revisions' data hold the same template. Each operator serializes the custom
/// resource its own way: one writes `false`, `0`, `""`, `{}` or `[]` where the other leaves the
/// field out (Go's `omitempty`), and Slinky marks more parts `$patch: replace`; those do not count.
pub fn same_template(a: &Value, b: &Value) -> bool {
    normalized(a) == normalized(b)
}

fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "$patch")
                .map(|(k, v)| (k.clone(), normalized(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rev(hash: &str, revision: i64, ours: bool, current: bool) -> RevisionInfo {
        RevisionInfo {
            hash: hash.into(),
            revision,
            ours,
            current,
        }
    }

    fn set(h: &[&str]) -> BTreeSet<String> {
        h.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn another_operators_revision_of_the_current_template_is_current() {
        let c = choose(
            &[rev("slinky1", 1, false, true)],
            "ours1",
            &set(&["slinky1"]),
        );
        assert_eq!(c.update_revision, "slinky1");
        assert!(c.foreign_outdated.is_empty());
    }

    #[test]
    fn another_operators_older_template_is_outdated_and_foreign() {
        let revisions = [rev("slinky1", 1, false, false)];
        let c = choose(&revisions, "ours1", &set(&["slinky1"]));
        assert_eq!(c.update_revision, "ours1");
        assert_eq!(c.foreign_outdated, set(&["slinky1"]));
        // Once ours exists and the template changed again, our old pods are ours to roll.
        let revisions = [
            rev("slinky1", 1, false, false),
            rev("ours1", 2, true, false),
        ];
        let c = choose(&revisions, "ours2", &set(&["slinky1", "ours1"]));
        assert_eq!(c.update_revision, "ours2");
        assert_eq!(c.foreign_outdated, set(&["slinky1"]));
    }

    #[test]
    fn our_own_revision_wins_and_a_pod_without_a_revision_is_foreign() {
        let revisions = [rev("slinky1", 1, false, true), rev("ours1", 2, true, true)];
        let c = choose(&revisions, "ours1", &set(&["slinky1", "ours1", "gone"]));
        assert_eq!(c.update_revision, "ours1");
        assert_eq!(c.foreign_outdated, set(&["slinky1", "gone"]));
    }

    #[test]
    fn templates_compare_without_zero_values_and_patch_markers() {
        let slinky = json!({"spec": {
            "template": {"$patch": "replace", "metadata": {}, "spec": {"hostname": "slinky-"}},
            "ordinalPadding": 0,
            "oversubscribeNode": false,
            "slurmd": {"$patch": "replace", "name": "", "image": "slurmd:26.05", "resources": {}},
            "logfile": {"$patch": "replace", "name": "", "image": "alpine"},
            "ssh": {"$patch": "replace", "enabled": false},
        }});
        let ours = json!({"spec": {
            "template": {"$patch": "replace", "spec": {"hostname": "slinky-"}},
            "ordinalPadding": 0,
            "oversubscribeNode": false,
            "slurmd": {"image": "slurmd:26.05"},
            "extraConf": null,
            "logfile": {"image": "alpine"},
            "ssh": {"enabled": false, "extraSshdConfig": ""},
        }});
        assert!(same_template(&slinky, &ours));
        let mut other = ours.clone();
        other["spec"]["slurmd"]["image"] = json!("slurmd:25.11");
        assert!(!same_template(&slinky, &other));
    }
}
