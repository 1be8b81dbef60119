//! One row per kind of claim.

use super::*;

#[derive(Default)]
struct Fake {
    claims: BTreeMap<String, Arc<PersistentVolumeClaim>>,
    volumes: BTreeMap<String, Arc<PersistentVolume>>,
    classes: BTreeMap<String, Arc<StorageClass>>,
}

impl Objects for Fake {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        assert_eq!(namespace, "ns");
        self.claims.get(name).cloned()
    }
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(name).cloned()
    }
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(name).cloned()
    }
}

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap()
}

fn fake() -> Fake {
    let mut f = Fake::default();
    for (name, text) in [
        (
            "late",
            "metadata: {name: late}\nprovisioner: example.com/local\nvolumeBindingMode: WaitForFirstConsumer\n",
        ),
        (
            "zoned",
            "metadata: {name: zoned}\nprovisioner: example.com/local\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies: [{matchLabelExpressions: [{key: zone, values: [a]}]}]\n",
        ),
        (
            "static",
            "metadata: {name: static}\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n",
        ),
        (
            "now",
            "metadata: {name: now}\nprovisioner: example.com/net\n",
        ),
    ] {
        f.classes.insert(name.into(), Arc::new(yaml(text)));
    }
    for (name, text) in [
        (
            "local",
            "metadata: {name: local}\nspec: {nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [k2]}]}]}}}\n",
        ),
        ("net", "metadata: {name: net}\nspec: {}\n"),
    ] {
        f.volumes.insert(name.into(), Arc::new(yaml(text)));
    }
    for (name, text) in [
        (
            "on-k2",
            "spec: {storageClassName: late, volumeName: local}\nstatus: {phase: Bound}\n",
        ),
        (
            "anywhere",
            "spec: {storageClassName: now, volumeName: net}\nstatus: {phase: Bound}\n",
        ),
        (
            "gone-pv",
            "spec: {storageClassName: now, volumeName: nothing}\nstatus: {phase: Bound}\n",
        ),
        // The test ground's binder: Bound without a volume.
        ("ground", "spec: {}\nstatus: {phase: Bound}\n"),
        (
            "fresh",
            "spec: {storageClassName: late}\nstatus: {phase: Pending}\n",
        ),
        (
            "picked",
            "metadata: {annotations: {volume.kubernetes.io/selected-node: k3}}\nspec: {storageClassName: late}\nstatus: {phase: Pending}\n",
        ),
        (
            "in-zone",
            "spec: {storageClassName: zoned}\nstatus: {phase: Pending}\n",
        ),
        (
            "slow",
            "spec: {storageClassName: now}\nstatus: {phase: Pending}\n",
        ),
        ("classless", "spec: {}\nstatus: {phase: Pending}\n"),
        (
            "no-class",
            "spec: {storageClassName: missing}\nstatus: {phase: Pending}\n",
        ),
        (
            "pre-made",
            "spec: {storageClassName: static}\nstatus: {phase: Pending}\n",
        ),
        (
            "lost",
            "spec: {storageClassName: now, volumeName: x}\nstatus: {phase: Lost}\n",
        ),
        (
            "deleting",
            "metadata: {deletionTimestamp: '2026-01-01T00:00:00Z'}\nspec: {storageClassName: now}\nstatus: {phase: Bound}\n",
        ),
        (
            "p-scratch",
            "metadata: {ownerReferences: [{apiVersion: v1, kind: Pod, name: p, uid: u1, controller: true}]}\nspec: {storageClassName: late}\nstatus: {phase: Pending}\n",
        ),
    ] {
        let mut claim: PersistentVolumeClaim = yaml(text);
        claim.metadata.name = Some(name.into());
        claim.metadata.namespace = Some("ns".into());
        f.claims.insert(name.into(), Arc::new(claim));
    }
    f
}

fn pod(claims: &[&str]) -> Pod {
    let volumes: Vec<String> = claims
        .iter()
        .map(|c| format!("{{name: v-{c}, persistentVolumeClaim: {{claimName: {c}}}}}"))
        .collect();
    yaml(&format!(
        "metadata: {{name: p, namespace: ns, uid: u1}}\nspec: {{containers: [], volumes: [{}]}}\n",
        volumes.join(", ")
    ))
}

fn node(name: &str, zone: &str) -> Node {
    yaml(&format!(
        "metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, zone: {zone}}}}}\n"
    ))
}

fn blocked(gate: &Gate) -> (String, String) {
    match gate {
        Gate::Blocked { reason, message } => (reason.clone(), message.clone()),
        other => panic!("not blocked: {other:?}"),
    }
}

#[test]
fn what_holds_a_pod_back() {
    let f = fake();
    for (claim, reason, says) in [
        (
            "nothere",
            "WaitingForVolume",
            "persistentvolumeclaim \"nothere\" not found",
        ),
        (
            "slow",
            "WaitingForVolume",
            "pod has unbound immediate PersistentVolumeClaims: \"slow\"",
        ),
        ("classless", "WaitingForVolume", "unbound immediate"),
        ("no-class", "WaitingForVolume", "storageclass \"missing\""),
        (
            "gone-pv",
            "WaitingForVolume",
            "persistentvolume \"nothing\", which does not exist",
        ),
        (
            "lost",
            "WaitingForVolume",
            "non-existent persistentvolume \"x\"",
        ),
        ("deleting", "WaitingForVolume", "is being deleted"),
        ("pre-made", "UnsupportedVolume", "no provisioner"),
    ] {
        let v = assess(&pod(&[claim]), &f);
        let (r, m) = blocked(&v.gate);
        assert_eq!(r, reason, "{claim}");
        assert!(m.contains(says), "{claim}: {m}");
    }
    // Every claim that holds it back is named.
    let v = assess(&pod(&["nothere", "anywhere", "slow"]), &f);
    let (_, m) = blocked(&v.gate);
    assert!(m.contains("nothere") && m.contains("slow"), "{m}");
}

#[test]
fn bound_claims_let_it_go_where_their_volumes_are() {
    let f = fake();
    let free = assess(&pod(&["anywhere", "ground"]), &f);
    assert_eq!(free.gate, Gate::Ready);
    assert!(!free.limits_nodes());
    assert_eq!(assess(&pod(&[]), &f).gate, Gate::Ready);

    let local = assess(&pod(&["on-k2", "anywhere"]), &f);
    assert_eq!(local.gate, Gate::Ready);
    assert_eq!(local.unfit(&node("k2", "a")), None);
    assert_eq!(
        local.unfit(&node("k1", "a")).as_deref(),
        Some("volume node affinity conflict: persistentvolume \"local\" of claim \"on-k2\"")
    );
}

#[test]
fn wait_for_first_consumer_claims_are_provisioned_where_the_pod_goes() {
    let f = fake();
    let v = assess(&pod(&["fresh", "anywhere"]), &f);
    assert_eq!(v.gate, Gate::Provision(vec![("fresh".into(), None)]));
    assert_eq!(v.gate.pinned(), None);
    assert_eq!(v.unfit(&node("k1", "b")), None);

    // Given a node already: only that node.
    let v = assess(&pod(&["fresh", "picked"]), &f);
    assert_eq!(
        v.gate,
        Gate::Provision(vec![
            ("fresh".into(), None),
            ("picked".into(), Some("k3".into()))
        ])
    );
    assert_eq!(v.gate.pinned(), Some("k3"));
    assert_eq!(v.unfit(&node("k3", "b")), None);
    assert!(
        v.unfit(&node("k1", "b"))
            .unwrap()
            .contains("being provisioned on k3")
    );

    // The class's allowed topologies.
    let v = assess(&pod(&["in-zone"]), &f);
    assert_eq!(v.unfit(&node("k1", "a")), None);
    assert!(
        v.unfit(&node("k1", "b"))
            .unwrap()
            .contains("allowedTopologies")
    );
}

#[test]
fn ephemeral_claims_are_the_pods_own() {
    let f = fake();
    let eph = |volume: &str, uid: &str| -> Pod {
        yaml(&format!(
            "metadata: {{name: p, namespace: ns, uid: {uid}}}\nspec: {{containers: [], volumes: [{{name: {volume}, ephemeral: {{volumeClaimTemplate: {{spec: {{}}}}}}}}]}}\n"
        ))
    };
    assert_eq!(
        claims_of(&eph("scratch", "u1")),
        [("p-scratch".to_string(), true)]
    );
    assert_eq!(
        assess(&eph("scratch", "u1"), &f).gate,
        Gate::Provision(vec![("p-scratch".into(), None)])
    );
    let (_, m) = blocked(&assess(&eph("scratch", "u2"), &f).gate);
    assert!(m.contains("not created for this pod"), "{m}");
    let (_, m) = blocked(&assess(&eph("other", "u1"), &f).gate);
    assert!(m.contains("ephemeral volume controller"), "{m}");
}

#[test]
fn nodes_the_volumes_rule_out() {
    let f = fake();
    let slurm: BTreeSet<String> = ["k1", "k2", "k3"].map(String::from).into();
    let nodes = [
        node("k1", "a"),
        node("k2", "a"),
        node("k3", "a"),
        node("other", "a"),
    ];
    let local = assess(&pod(&["on-k2"]), &f);
    let excluded = excluded_nodes(std::slice::from_ref(&local), &nodes, &slurm);
    assert_eq!(excluded.keys().collect::<Vec<_>>(), ["k1", "k3"]);
    assert_eq!(too_few_nodes(3, &excluded, 1), None);
    // Two pods on one node-bound volume: one node, two needed.
    let why = too_few_nodes(3, &excluded, 2).unwrap();
    assert_eq!(
        why,
        "the pods' volumes allow 1 of the 3 Slurm node(s); 2 needed: volume node affinity conflict: persistentvolume \"local\" of claim \"on-k2\" on k1,k3"
    );
    // A volume on a node that is no Slurm node: none left.
    let elsewhere = assess(&pod(&["picked"]), &f);
    let only = [node("k1", "a"), node("k2", "a")];
    let slurm2: BTreeSet<String> = ["k1", "k2"].map(String::from).into();
    let excluded = excluded_nodes(std::slice::from_ref(&elsewhere), &only, &slurm2);
    assert!(
        too_few_nodes(2, &excluded, 1)
            .unwrap()
            .contains("allow 0 of the 2")
    );
    // Nothing to rule out: no node looked at.
    let free = assess(&pod(&["anywhere"]), &f);
    assert!(excluded_nodes(&[free], &nodes, &slurm).is_empty());
}
