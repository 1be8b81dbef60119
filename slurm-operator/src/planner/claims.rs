//! `persistentVolumeClaimRetentionPolicy`: which owners a NodeSet's claim names, as the
//! StatefulSet controller decides for its own (Kubernetes' `StatefulSetAutoDeletePVC`).
//!
//! The garbage collector does the deleting: a claim owned by the NodeSet goes with it
//! (`whenDeleted: Delete`); a claim owned by its pod goes once that pod is gone, and only the
//! pods of a scale-in are made its owners (`whenScaled: Delete`), just before they are deleted.
//! `Retain` names no owner. The owners are plain references (not `controller`, no
//! `blockOwnerDeletion`), so that the claims stay the user's to adopt elsewhere.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::crd::{PersistentVolumeClaimRetentionPolicy, PvcRetention};

/// The owners a claim should name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owners {
    /// The NodeSet.
    pub nodeset: bool,
    /// The claim's pod.
    pub pod: bool,
}

/// The owners of the claim of a pod; `condemned` when the pod goes in a scale-in.
pub fn owners(policy: &PersistentVolumeClaimRetentionPolicy, condemned: bool) -> Owners {
    let pod = condemned && policy.when_scaled == PvcRetention::Delete;
    Owners {
        // A condemned pod's claim goes with the pod only (a NodeSet owner would keep it too).
        nodeset: policy.when_deleted == PvcRetention::Delete && !pod,
        pod,
    }
}

/// `current` with the references to `nodeset` and `pod` as `wanted` (others kept as they are),
/// or `None` when that is what `current` holds. `pod` is `None` when the claim has no pod: then
/// a reference to a pod is neither added nor removed.
pub fn references(
    current: &[OwnerReference],
    nodeset: &OwnerReference,
    pod: Option<&OwnerReference>,
    wanted: Owners,
) -> Option<Vec<OwnerReference>> {
    let names = |r: &OwnerReference, o: &OwnerReference| r.uid == o.uid;
    let mut next: Vec<OwnerReference> = current
        .iter()
        .filter(|r| !names(r, nodeset) || wanted.nodeset)
        .filter(|r| pod.is_none_or(|p| !names(r, p) || wanted.pod))
        .cloned()
        .collect();
    let mut add = |o: &OwnerReference| {
        if !next.iter().any(|r| names(r, o)) {
            next.push(plain(o));
        }
    };
    if wanted.nodeset {
        add(nodeset);
    }
    if let (true, Some(p)) = (wanted.pod, pod) {
        add(p);
    }
    (next != current).then_some(next)
}

/// `owner` as a plain reference: not the controller, not blocking its owner's deletion.
fn plain(owner: &OwnerReference) -> OwnerReference {
    OwnerReference {
        controller: None,
        block_owner_deletion: None,
        ..owner.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PvcRetention::{Delete, Retain};

    fn policy(
        when_deleted: PvcRetention,
        when_scaled: PvcRetention,
    ) -> PersistentVolumeClaimRetentionPolicy {
        PersistentVolumeClaimRetentionPolicy {
            when_deleted,
            when_scaled,
        }
    }

    fn owner(kind: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: kind.to_lowercase(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn the_statefulset_controllers_table() {
        let (set, pod) = (true, true);
        for (deleted, scaled, condemned, want) in [
            (Retain, Retain, false, (!set, !pod)),
            (Retain, Retain, true, (!set, !pod)),
            (Delete, Retain, false, (set, !pod)),
            (Delete, Retain, true, (set, !pod)),
            (Retain, Delete, false, (!set, !pod)),
            (Retain, Delete, true, (!set, pod)),
            (Delete, Delete, false, (set, !pod)),
            (Delete, Delete, true, (!set, pod)),
        ] {
            let got = owners(&policy(deleted, scaled), condemned);
            assert_eq!(
                (got.nodeset, got.pod),
                want,
                "{deleted:?}/{scaled:?} condemned={condemned}"
            );
        }
    }

    #[test]
    fn references_are_added_and_taken_off_leaving_others_alone() {
        let (set, pod, other) = (
            owner("NodeSet", "s"),
            owner("Pod", "p"),
            owner("Backup", "b"),
        );
        let both = Owners {
            nodeset: true,
            pod: true,
        };
        let none = Owners {
            nodeset: false,
            pod: false,
        };
        let added = references(std::slice::from_ref(&other), &set, Some(&pod), both).unwrap();
        assert_eq!(added.len(), 3);
        assert_eq!(added[0], other, "a foreign owner stays as it is");
        assert!(
            added[1..]
                .iter()
                .all(|r| r.controller.is_none() && r.block_owner_deletion.is_none()),
            "plain references: {added:?}"
        );
        assert_eq!(references(&added, &set, Some(&pod), both), None, "in line");
        assert_eq!(
            references(&added, &set, Some(&pod), none),
            Some(vec![other.clone()])
        );
        // No pod (the claim's pod is gone): a pod reference is left as it is.
        let with_pod = vec![plain(&pod)];
        assert_eq!(references(&with_pod, &set, None, none), None);
        assert_eq!(references(&[], &set, None, none), None);
    }
}
