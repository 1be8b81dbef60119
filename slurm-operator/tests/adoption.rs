//! Moving a running cluster from Slinky's operator to this one without a restart (issue 23,
//! part 3), on the test ground.
//!
//! The custom resources of `manifests/lifecycle.yaml` (a Controller, a RestApi, a NodeSet of 2
//! and a Token whose tokens live 40 s) are applied, and their children are made as Slinky's
//! operator (1.3, main) leaves them, under its field manager (`manager`, its binary's name):
//! - the StatefulSet `slurm-controller` with `serviceName: slurm-controller-internal` and the
//!   default `OrderedReady` policy, its pod template annotated with Slinky's hashes
//!   (`slurm-config-hash` of Slinky's slurm.conf), the headless `slurm-controller-internal`
//!   Service, the `slurm-controller` Service selecting `controller.slinky.slurm.net/active=true`
//!   (the label Slinky's status pass puts on the answering slurmctld pod), and the ConfigMap
//!   `slurm-config` with Slinky 1.3's `SlurmctldHost=<pod>(<pod>.slurm-controller-internal.<ns>)`
//!   and `SlurmctldAddr` lines;
//! - the NodeSet's ControllerRevision as Kubernetes' history code makes it for Slinky (name
//!   `<nodeset>-<hash>`, labels from the template plus `controller-revision-hash`, the NodeSet's
//!   annotations, the patch of the template parts, the hash an FNV-32 of it encoded as
//!   Kubernetes' `SafeEncodeString`), its two pods created directly with that hash, and the
//!   NodeSet's status (`nodeSetHash`);
//! - the workers' headless Service and PDB, the RestApi's Deployment and Service;
//! - the Token's Secret holding a token of Slinky's claims, owned (as controller) by the JWT key
//!   Secret, as Slinky's token builder sets it.
//!
//! The pod specs are this operator's rendering (which follows Slinky's builders); what the test
//! pins is the metadata Slinky's operator leaves and that an adoption meets.
//!
//! With Slurm running and a job over both workers, the operator starts. Pass: no pod deleted or
//! recreated (UIDs and restart counts), no Slurm node drained at any poll, the job completes,
//! a new job runs over every worker, the Token's Secret gets two fresh tokens (and the Token as
//! its owner), the NodeSet is `Synced` with its 2 pods ready on Slinky's revision, the
//! Controller is `Synced` and says `Adopted=False`/`RecreateRequired` (its StatefulSet's
//! immutable fields differ), with an `AdoptionPending` event, and that StatefulSet is untouched.
//! Then the user opts in to the restart ([`opt_in_restart`]).

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use slurm_client::model::{JobState, Node, NodeState};
use slurm_client::{Client, StaticToken};
use slurm_operator::crd::{Controller, NodeSet, RestApi, Token};
use slurm_operator::keys::{ANNOTATION_CONFIG_FILES_HASH, ANNOTATION_SLURM_CONFIG_HASH};
use slurm_operator::render;

use common::workers::{LIMIT, NODESET, sbatch};
use common::{TestEnv, ground};

/// Slinky's operator binary is `/manager`: client-go names its field manager after it.
const SLINKY_MANAGER: &str = "manager";
const TOKEN_SECRET: &str = "slurm-token-jwt-slurm";

#[tokio::test(flavor = "multi_thread")]
async fn a_running_slinky_cluster_is_adopted_without_a_restart() {
    let start = Instant::now();
    let mut env = TestEnv::new("op-adopt");
    let ns = env.name().to_owned();
    env.apply_manifest("lifecycle.yaml");
    ground().ok(&[
        "patch",
        "-n",
        &ns,
        "token/slurm-token",
        "--type=merge",
        "-p",
        r#"{"spec":{"lifetime":"40s"}}"#,
    ]);
    let client = ground()
        .kube_client()
        .await
        .expect("the ground's API server");
    let slinky = Slinky::read(&client, &ns).await;
    slinky.leave_children(&env).await;
    for (what, want) in [
        ("statefulset/slurm-controller", "1"),
        ("deployment/slurm-restapi", "1"),
    ] {
        env.wait_for(what, "{.status.readyReplicas}", LIMIT, |r| r == want);
    }
    let pod_names = [
        "slurm-controller-0".to_owned(),
        format!("{NODESET}-0"),
        format!("{NODESET}-1"),
    ];
    for pod in &pod_names[1..] {
        env.wait_for(
            &format!("pod/{pod}"),
            "{.status.conditions[?(@.type==\"Ready\")].status}",
            LIMIT,
            |s| s == "True",
        );
    }
    let rest = rest_client(&env);
    for host in ["slinky-0", "slinky-1"] {
        common::workers::wait_node(&rest, host, "idle", |n| {
            n.state == NodeState::Idle && !n.is_draining() && !n.is_not_responding()
        })
        .await;
    }
    eprintln!("adoption: Slinky's cluster up: {:.1?}", start.elapsed());

    let job = sbatch(&env, "sbatch --parsable -N 2 --wrap 'srun sleep 45'");
    wait_job(&rest, job, |s| s == JobState::Running).await;
    let before = pod_identities(&client, &ns).await;
    for pod in &pod_names {
        assert!(before.contains_key(pod), "no pod {pod}: {before:?}");
    }
    let sts_generation = generation::<StatefulSet>(&client, &ns, "slurm-controller").await;
    let token_before = token_value(&env);

    let t = Instant::now();
    env.start_operator(&["--slurm-poll", "1s"]);

    // The NodeSet is taken over on Slinky's revision: its pods stay current.
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.nodeSetHash}",
        LIMIT,
        |h| h == slinky.revision_hash,
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.conditions[?(@.type==\"Synced\")].status}",
        LIMIT,
        |s| s == "True",
    );
    env.wait_for(
        &format!("nodeset/{NODESET}"),
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "2",
    );
    let reason = env.wait_for(
        "controller/slurm",
        "{.status.conditions[?(@.type==\"Adopted\")].reason}",
        LIMIT,
        |r| !r.is_empty(),
    );
    assert_eq!(reason, "RecreateRequired");
    let synced = ground().get(
        &ns,
        "controller/slurm",
        "{.status.conditions[?(@.type==\"Synced\")].status}",
    );
    assert_eq!(synced, "True", "the Controller's Synced condition");
    let message = ground().get(
        &ns,
        "controller/slurm",
        "{.status.conditions[?(@.type==\"Adopted\")].message}",
    );
    assert!(
        message.contains("StatefulSet slurm-controller") && message.contains("spec.serviceName"),
        "{message}"
    );
    let events = ground().get(
        &ns,
        "events.events.k8s.io",
        "{.items[?(@.reason==\"AdoptionPending\")].regarding.name}",
    );
    assert!(
        events.contains("slurm"),
        "no AdoptionPending event: {events:?}"
    );
    eprintln!("adoption: taken over: {:.1?}", t.elapsed());

    // The running job ends well, and no node was drained meanwhile.
    let mut drained = Vec::new();
    let deadline = Instant::now() + LIMIT;
    loop {
        for host in ["slinky-0", "slinky-1"] {
            let n = common::workers::node(&rest, host).await;
            if let Some(why) = out_of_service(&n) {
                drained.push(format!("{host}: {why}"));
            }
        }
        let state = rest.get_job(job).await.expect("the job").value.state;
        if state != JobState::Running && state != JobState::Pending {
            assert_eq!(state, JobState::Completed, "job {job}");
            break;
        }
        assert!(Instant::now() < deadline, "job {job} still {state:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        drained.is_empty(),
        "Slurm nodes drained or down: {drained:?}"
    );
    let (code, out) = env.run_in_cluster("slurm", "sbatch --wait -N 2 --wrap 'srun hostname'");
    assert_eq!(code, 0, "a new job over both workers: {out}");

    // Tokens keep coming, now from this operator, into the Secret it now owns.
    let mut seen = vec![token_before];
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < 3 {
        let now = token_value(&env);
        if !seen.contains(&now) {
            seen.push(now);
        }
        assert!(
            Instant::now() < deadline,
            "{} refreshes of the Token's Secret in 120 s, want 2",
            seen.len() - 1
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let owners = ground().get(
        &ns,
        &format!("secret/{TOKEN_SECRET}"),
        "{.metadata.ownerReferences[?(@.controller==true)].kind}",
    );
    assert_eq!(owners, "Token", "the token Secret's controller");

    let after = pod_identities(&client, &ns).await;
    assert_eq!(after, before, "pods (uid, restarts) before and after");
    assert_eq!(
        generation::<StatefulSet>(&client, &ns, "slurm-controller").await,
        sts_generation,
        "the held StatefulSet was written"
    );
    for host in ["slinky-0", "slinky-1"] {
        let n = common::workers::node(&rest, host).await;
        assert_eq!(out_of_service(&n), None, "{host}");
    }
    eprintln!("adoption: without a restart: {:.1?}", start.elapsed());

    opt_in_restart(&env, &rest, &client, &after).await;
    eprintln!("adoption: total {:.1?}", start.elapsed());
}

/// The user opts in (`slurm-rs/adopt=restart` on the Controller): the held StatefulSet is
/// deleted keeping its pod, made again as this operator's, takes the pod over and replaces it.
/// slurmctld restarts once; a job running over both workers survives it, the workers are not
/// touched, and `Adopted` turns `True`.
async fn opt_in_restart(
    env: &TestEnv,
    rest: &Client,
    client: &kube::Client,
    before: &BTreeMap<String, (String, i32)>,
) {
    let ns = env.name();
    let t = Instant::now();
    let job = sbatch(env, "sbatch --parsable -N 2 --wrap 'srun sleep 40'");
    wait_job(rest, job, |s| s == JobState::Running).await;
    let old_set = ground().get(ns, "statefulset/slurm-controller", "{.metadata.uid}");
    ground().ok(&[
        "annotate",
        "-n",
        ns,
        "controller/slurm",
        "slurm-rs/adopt=restart",
    ]);
    env.wait_for(
        "statefulset/slurm-controller",
        "{.metadata.uid} {.spec.serviceName}",
        LIMIT,
        |s| {
            s.split_whitespace().collect::<Vec<_>>()
                != [old_set.as_str(), "slurm-controller-internal"]
                && s.ends_with(" slurm-controller")
        },
    );
    let old_pod = &before["slurm-controller-0"].0;
    env.wait_for(
        "pod/slurm-controller-0",
        "{.metadata.uid} {.status.conditions[?(@.type==\"Ready\")].status}",
        LIMIT,
        |s| !s.starts_with(old_pod.as_str()) && s.ends_with(" True"),
    );
    env.wait_for(
        "controller/slurm",
        "{.status.conditions[?(@.type==\"Adopted\")].status}",
        LIMIT,
        |s| s == "True",
    );
    let events = ground().get(
        ns,
        "events.events.k8s.io",
        "{.items[?(@.reason==\"Adopted\")].note}",
    );
    assert!(
        events.contains("took over StatefulSet slurm-controller"),
        "no Adopted event for the StatefulSet: {events:?}"
    );
    wait_job(rest, job, |s| {
        s != JobState::Running && s != JobState::Pending
    })
    .await;
    let state = rest.get_job(job).await.expect("the job").value.state;
    assert_eq!(
        state,
        JobState::Completed,
        "job {job} across slurmctld's restart"
    );
    let (code, out) = env.run_in_cluster("slurm", "sbatch --wait -N 2 --wrap 'srun hostname'");
    assert_eq!(
        code, 0,
        "a new job over both workers after the restart: {out}"
    );
    let now = pod_identities(client, ns).await;
    for worker in [format!("{NODESET}-0"), format!("{NODESET}-1")] {
        assert_eq!(now[&worker], before[&worker], "{worker} (uid, restarts)");
    }
    for host in ["slinky-0", "slinky-1"] {
        let n = common::workers::node(rest, host).await;
        assert_eq!(out_of_service(&n), None, "{host}");
    }
    eprintln!(
        "adoption: opted in, slurmctld replaced: {:.1?}",
        t.elapsed()
    );
}

/// The custom resources as the API server holds them, and Slinky's revision of the NodeSet.
struct Slinky {
    client: kube::Client,
    ns: String,
    controller: Controller,
    restapi: RestApi,
    nodeset: NodeSet,
    token: Token,
    revision_data: Value,
    revision_hash: String,
}

impl Slinky {
    async fn read(client: &kube::Client, ns: &str) -> Slinky {
        let nodeset_json: Value = Api::<kube::api::DynamicObject>::namespaced_with(
            client.clone(),
            ns,
            &kube::api::ApiResource::erase::<NodeSet>(&()),
        )
        .get(NODESET)
        .await
        .map(|o| serde_json::to_value(o).unwrap())
        .expect("the NodeSet");
        let revision_data = slinky_revision_data(&nodeset_json["spec"]);
        let revision_hash = slinky_hash(&serde_json::to_string(&revision_data).unwrap());
        Slinky {
            client: client.clone(),
            ns: ns.into(),
            controller: Api::namespaced(client.clone(), ns)
                .get("slurm")
                .await
                .unwrap(),
            restapi: Api::namespaced(client.clone(), ns)
                .get("slurm")
                .await
                .unwrap(),
            nodeset: Api::namespaced(client.clone(), ns)
                .get(NODESET)
                .await
                .unwrap(),
            token: Api::namespaced(client.clone(), ns)
                .get("slurm-token")
                .await
                .unwrap(),
            revision_data,
            revision_hash,
        }
    }

    async fn create<K>(&self, obj: K)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        let params = PostParams {
            field_manager: Some(SLINKY_MANAGER.into()),
            ..PostParams::default()
        };
        let name = obj.name_any();
        Api::<K>::namespaced(self.client.clone(), &self.ns)
            .create(&params, &obj)
            .await
            .unwrap_or_else(|e| panic!("{} {name}: {e}", K::kind(&())));
    }

    /// Every child of the cluster, as Slinky 1.3's operator leaves it.
    async fn leave_children(&self, env: &TestEnv) {
        let ns = &self.ns;
        let secrets: Vec<Secret> = {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
            vec![
                api.get("slurm-auth-slurm").await.unwrap(),
                api.get("slurm-auth-jwt").await.unwrap(),
            ]
        };
        let extra: ConfigMap = Api::namespaced(self.client.clone(), ns)
            .get("slurm-config-extra")
            .await
            .unwrap();
        let nodesets = [self.nodeset.clone()];
        let inputs = render::controller::ControllerInputs {
            nodesets: &nodesets,
            accounting: None,
            config_maps: std::slice::from_ref(&extra),
            secrets: &secrets,
        };
        let mut children = render::controller::render(&self.controller, &inputs).unwrap();

        // slurm.conf: Slinky 1.3 names each slurmctld pod through the headless Service and
        // gives clients the Service's address.
        let mut config = children.config_maps.remove(0);
        let data = config.data.as_mut().unwrap();
        let conf = data["slurm.conf"]
            .lines()
            .map(|l| {
                if l.starts_with("SlurmctldHost=") {
                    format!(
                        "SlurmctldHost=slurm-controller-0(slurm-controller-0.slurm-controller-internal.{ns})\nSlurmctldAddr=slurm-controller.{ns}"
                    )
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n";
        data.insert("slurm.conf".into(), conf);
        let config_hash = render::hash::checksum_map(data);
        self.create(config).await;

        let owner = render::controller_ref(&self.controller).unwrap();
        let controller_labels =
            render::labels::component_labels(render::labels::Component::Controller, "slurm");
        let mut internal_labels = self.controller.labels().clone();
        internal_labels.extend(controller_labels.clone());
        self.create(Service {
            metadata: ObjectMeta {
                name: Some("slurm-controller-internal".into()),
                namespace: Some(ns.clone()),
                labels: Some(internal_labels),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                publish_not_ready_addresses: Some(true),
                selector: Some(render::labels::selector_labels(
                    render::labels::Component::Controller,
                    "slurm",
                )),
                ports: Some(vec![ServicePort {
                    name: Some("slurmctld".into()),
                    port: 6817,
                    protocol: Some("TCP".into()),
                    target_port: Some(IntOrString::String("slurmctld".into())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        })
        .await;
        for mut service in children.services {
            if service.name_any() == "slurm-controller" {
                let spec = service.spec.as_mut().unwrap();
                spec.selector
                    .get_or_insert_with(BTreeMap::new)
                    .insert("controller.slinky.slurm.net/active".into(), "true".into());
            }
            self.create(service).await;
        }
        for mut sts in children.stateful_sets {
            let spec = sts.spec.as_mut().unwrap();
            spec.service_name = Some("slurm-controller-internal".into());
            spec.pod_management_policy = None;
            let annotations = spec
                .template
                .metadata
                .get_or_insert_with(Default::default)
                .annotations
                .get_or_insert_with(BTreeMap::new);
            annotations.remove(ANNOTATION_CONFIG_FILES_HASH);
            annotations.insert(ANNOTATION_SLURM_CONFIG_HASH.into(), config_hash.clone());
            self.create(sts).await;
        }
        // Before the workers start: they fetch their config through that Service.
        self.mark_active_controller().await;

        let (deployment, service) =
            render::restapi::render(&self.restapi, &self.controller).unwrap();
        self.create(service).await;
        self.create(deployment).await;

        let (workers, pdb) = render::workers::render(&self.controller, &nodesets).unwrap();
        self.create(workers).await;
        self.create(pdb).await;

        // The NodeSet's history, as Kubernetes' history code makes a revision for Slinky.
        let mut labels = self.nodeset.spec.template.metadata.labels.clone();
        labels.insert(
            "controller-revision-hash".into(),
            self.revision_hash.clone(),
        );
        self.create(ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("{NODESET}-{}", self.revision_hash)),
                namespace: Some(ns.clone()),
                labels: Some(labels),
                annotations: Some(self.nodeset.annotations().clone()),
                owner_references: Some(vec![render::controller_ref(&self.nodeset).unwrap()]),
                ..Default::default()
            },
            data: Some(RawExtension(self.revision_data.clone())),
            revision: 1,
        })
        .await;
        for ordinal in 0..2 {
            let mut pod = render::nodeset_pod::pod(
                &self.nodeset,
                &self.controller,
                ordinal,
                &self.revision_hash,
                "cluster.local",
            )
            .unwrap();
            pod.annotations_mut()
                .retain(|k, _| !k.starts_with("slurm-rs/"));
            self.create(pod).await;
        }
        let status = json!({"status": {
            "replicas": 2, "updatedReplicas": 2, "readyReplicas": 0, "availableReplicas": 0,
            "desired": 2, "nodeSetHash": self.revision_hash,
            "selector": format!("app.kubernetes.io/instance={NODESET},app.kubernetes.io/name=slurmd"),
        }});
        Api::<NodeSet>::namespaced(self.client.clone(), ns)
            .patch_status(
                NODESET,
                &PatchParams {
                    field_manager: Some(SLINKY_MANAGER.into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(status),
            )
            .await
            .expect("the NodeSet's status");

        // The Token's Secret: a token of Slinky's claims, owned by the JWT key Secret.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let jwt = slurm_operator::reconcile::token::mint(
            env.jwt_key.as_bytes(),
            "slurm",
            Duration::from_secs(40),
            now,
        );
        let mut secret = render::token::secret(&self.token, &jwt).unwrap();
        let key = &secrets[1];
        secret.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Secret".into(),
            name: key.name_any(),
            uid: key.uid().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        secret.immutable = Some(false);
        self.create(secret).await;
    }

    /// Slinky's status pass labels the slurmctld pod that answers `ping`; its Service selects it.
    async fn mark_active_controller(&self) {
        let deadline = Instant::now() + LIMIT;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        while api.get_opt("slurm-controller-0").await.unwrap().is_none() {
            assert!(Instant::now() < deadline, "no pod slurm-controller-0");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        api.patch(
            "slurm-controller-0",
            &PatchParams {
                field_manager: Some(SLINKY_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"metadata": {"labels": {
                "controller.slinky.slurm.net/active": "true"
            }}})),
        )
        .await
        .expect("labelling the active slurmctld");
    }
}

/// What Slinky's NodeSet controller stores in a ControllerRevision: the template (marked
/// `$patch: replace`), `ordinalPadding` and `oversubscribeNode` always, and `slurmd`,
/// `extraConf`, `logfile`, `ssh` when present (the maps marked `$patch: replace` too).
fn slinky_revision_data(spec: &Value) -> Value {
    let mut template = spec["template"].clone();
    template["$patch"] = json!("replace");
    let mut data = json!({
        "template": template,
        "ordinalPadding": spec.get("ordinalPadding").cloned().unwrap_or(json!(0)),
        "oversubscribeNode": spec.get("oversubscribeNode").cloned().unwrap_or(json!(false)),
    });
    for part in ["slurmd", "logfile", "ssh"] {
        if let Some(Value::Object(m)) = spec.get(part) {
            let mut m = m.clone();
            m.insert("$patch".into(), json!("replace"));
            data[part] = Value::Object(m);
        }
    }
    if let Some(conf) = spec.get("extraConf").filter(|c| c.is_string()) {
        data["extraConf"] = conf.clone();
    }
    json!({ "spec": data })
}

/// Kubernetes' revision hash for `raw` with collision count 0: FNV-1 (32 bits) of the data and
/// of "0", its decimal form mapped through `SafeEncodeString`'s alphabet.
fn slinky_hash(raw: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u32 = 0x811c_9dc5;
    for b in raw.bytes().chain(*b"0") {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(b);
    }
    h.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// Why Slurm would not run a job on `n` (drained, down or not answering), if it would not.
fn out_of_service(n: &Node) -> Option<String> {
    (n.is_draining() || n.is_not_responding() || n.state == NodeState::Down)
        .then(|| format!("{:?} {:?} {:?}", n.state, n.state_flags, n.reason))
}

/// A REST client through the RestApi Service with a token the test mints (an hour).
fn rest_client(env: &TestEnv) -> Client {
    let ip = env.wait_for("service/slurm-restapi", "{.spec.clusterIP}", LIMIT, |ip| {
        ip.starts_with("10.")
    });
    let port = test_support::ground::forward_into_ground(format!("{ip}:6820").parse().unwrap());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let jwt = slurm_operator::reconcile::token::mint(
        env.jwt_key.as_bytes(),
        "slurm",
        Duration::from_secs(3600),
        now,
    );
    Client::builder(format!("http://{port}"))
        .token(StaticToken::new(jwt.expose_secret().to_owned()))
        .build()
        .unwrap()
}

async fn wait_job(client: &Client, job: u32, check: impl Fn(JobState) -> bool) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let state = client.get_job(job).await.expect("the job").value.state;
        if check(state.clone()) {
            return;
        }
        assert!(Instant::now() < deadline, "job {job}: {state:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every pod of the namespace: UID and the restart counts of its containers.
async fn pod_identities(client: &kube::Client, ns: &str) -> BTreeMap<String, (String, i32)> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        // The short-lived pods that run Slurm commands for the test come and go.
        .filter(|p| {
            p.labels()
                .get("app.kubernetes.io/name")
                .is_some_and(|n| n != "slurm-test-client")
        })
        .map(|p| {
            let restarts = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|cs| cs.iter().map(|c| c.restart_count).sum())
                .unwrap_or(0);
            (p.name_any(), (p.uid().unwrap_or_default(), restarts))
        })
        .collect()
}

async fn generation<K>(client: &kube::Client, ns: &str, name: &str) -> Option<i64>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Api::<K>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .meta()
        .generation
}

/// The token in the Token's Secret (compared, never printed).
fn token_value(env: &TestEnv) -> String {
    ground().get(
        env.name(),
        &format!("secret/{TOKEN_SECRET}"),
        "{.data.SLURM_JWT}",
    )
}
