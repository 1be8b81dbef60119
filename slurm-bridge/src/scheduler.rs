//! The scheduling loop: wakes on pod, node and job changes (never on a blind timer alone),
//! gathers each woken workload's pods and job, asks [`decide`](crate::decide) what to do, and
//! applies it, up to 32 workloads at once, and 32 more whose Slurm job changed (a job that
//! started has its pods bound without waiting behind a burst's submissions). A failing workload
//! backs off (1 s doubling to 5 min, see [`queue`](crate::queue)) without holding up others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use slurm_client::{JobState, JobUpdate};
use tokio::sync::mpsc;

use crate::assumed::Assumed;
use crate::config::Config;
use crate::decide::{self, Action, JobView, Phase, PodView};
use crate::feasible;
use crate::identify;
use crate::jobs::{self, JobBook};
use crate::keys;
use crate::members::Members;
use crate::metrics::Metrics;
use crate::pod_group;
use crate::pods;
use crate::queue::{Lane, Queue};
use crate::resources::Requests;
use crate::roots;
use crate::slurm_nodes::SlurmNodes;
use crate::storage::{self, Storage};
use crate::translate::{self, Workload};
use crate::usage::Usage;
use crate::volumes::{self, Volumes};
use crate::workload::{Group, RootFacts, RootKind, WorkloadKey, key_of};

/// Why the loop should look at workloads again.
#[derive(Debug)]
pub enum Wake {
    /// A pod of this workload changed.
    Workload(WorkloadKey),
    /// Nodes changed (Kubernetes or Slurm): waiting workloads may fit now.
    Nodes,
    /// A job of these pods (`<ns>/<name>`) changed in Slurm.
    Pods(Vec<String>),
    /// A claim of this namespace, or (`None`) a PersistentVolume or StorageClass, changed:
    /// unbound pods that use claims may be placed now.
    Storage(Option<String>),
}

/// Everything the loop uses.
pub struct Scheduler {
    /// The API server.
    pub client: Client,
    /// slurmrestd.
    pub slurm: slurm_client::Client,
    /// The configuration.
    pub config: Arc<Config>,
    /// The bridge's jobs.
    pub book: JobBook,
    /// The bridge's pods (those with its scheduler name).
    pub pods: Store<Pod>,
    /// The Kubernetes nodes.
    pub nodes: Store<Node>,
    /// The Slurm node names.
    pub slurm_nodes: SlurmNodes,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Events.
    pub recorder: Recorder,
    /// Pods bound or labelled by this bridge that the pod store may not show so yet.
    pub assumed: Arc<Assumed>,
    /// What the pods bound to each node take of it, whoever bound them.
    pub usage: Usage,
    /// The PodGroups' sizes and written statuses.
    pub groups: pod_group::Groups,
    /// Which pods make each workload.
    pub members: Members,
    /// Claims, PersistentVolumes and StorageClasses.
    pub storage: Storage,
}

/// A workload's failure: what to tell and when to try again.
#[derive(Debug)]
struct Failed {
    action: &'static str,
    message: String,
}

/// The action of a pass that found no node with room for the workload now.
const UNSCHEDULABLE: &str = "unschedulable";

/// How many workloads are looked at at once. Each pass waits on slurmrestd and the API server,
/// not on the CPU; 128 made slurmrestd time out submissions and state polls under a burst (the
/// scale bench).
const PARALLEL_WORKLOADS: usize = 32;
/// How many more passes may run for workloads whose Slurm job changed: with one pool for all,
/// a job that had started waited ~9 s for a slot behind a burst's submissions (the scale bench's
/// bridge log), which is how long its pods waited for their binding.
const JOB_CHANGE_SLOTS: usize = 32;

impl Scheduler {
    /// Runs until the wake channel closes. Each workload is processed as soon as it is woken and
    /// a slot is free: a pass that waits on Slurm or the API server holds up no other workload.
    pub async fn run(self, mut wakes: mpsc::UnboundedReceiver<Wake>, tick: Duration) {
        let mut queue: Queue<WorkloadKey> = Queue::default();
        let mut running = FuturesUnordered::new();
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let this = &self;
        loop {
            while running.len() < PARALLEL_WORKLOADS + JOB_CHANGE_SLOTS {
                let lowest = if running.len() < PARALLEL_WORKLOADS {
                    Lane::Resync
                } else {
                    Lane::Job
                };
                let Some(key) = queue.pop(Instant::now(), lowest) else {
                    break;
                };
                running.push(async move {
                    let result = this.process(&key).await;
                    (key, result)
                });
            }
            let retry = queue.next_retry();
            tokio::select! {
                wake = wakes.recv() => match wake {
                    Some(wake) => self.wake(wake, &mut queue),
                    None => return,
                },
                Some((key, result)) = running.next(), if !running.is_empty() => {
                    match result.as_ref().err() {
                        // Its condition and event say why; retried within 10 s.
                        Some(f) if f.action == UNSCHEDULABLE => {
                            let next = queue.unschedulable(&key, Instant::now());
                            tracing::debug!(workload = %key, error = %f.message, retry_in = ?next, "no room for the workload");
                        }
                        Some(f) => {
                            let next = queue.done(&key, false, Instant::now());
                            tracing::warn!(workload = %key, action = f.action, error = %f.message, retry_in = ?next, "workload failed");
                        }
                        None => {
                            queue.done(&key, true, Instant::now());
                        }
                    }
                }
                _ = ticker.tick() => {
                    for p in self.pods.state() {
                        queue.wake(key_of(&p), Lane::Resync);
                    }
                    self.cancel_orphans().await;
                    self.count_waiting();
                }
                _ = tokio::time::sleep_until(retry.unwrap_or_else(Instant::now).into()), if retry.is_some() => {}
            }
            while let Ok(wake) = wakes.try_recv() {
                self.wake(wake, &mut queue);
            }
        }
    }

    fn wake(&self, wake: Wake, queue: &mut Queue<WorkloadKey>) {
        match wake {
            Wake::Workload(key) => queue.wake(key, Lane::Change),
            Wake::Nodes => {
                for p in self.pods.state() {
                    if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() {
                        queue.wake(key_of(&p), Lane::Change);
                    }
                }
            }
            Wake::Pods(names) => {
                for name in names {
                    if let Some(key) = self.members.workload_of(&name) {
                        queue.wake(key, Lane::Job);
                    }
                }
            }
            Wake::Storage(namespace) => {
                for p in self.pods.state() {
                    let unbound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none();
                    if unbound
                        && namespace
                            .as_ref()
                            .is_none_or(|ns| p.namespace().as_ref() == Some(ns))
                        && !volumes::claims_of(&p).is_empty()
                    {
                        queue.wake(key_of(&p), Lane::Change);
                    }
                }
            }
        }
    }

    /// The workload's pods (sorted by name), job and gang size → actions, applied in order.
    async fn process(&self, key: &WorkloadKey) -> Result<(), Failed> {
        let members: Vec<Arc<Pod>> = self
            .members
            .of(key, &self.pods)
            .into_iter()
            .filter(|p| self.managed(p))
            .collect();
        if members.is_empty() {
            self.groups.forget(key);
            return Ok(());
        }
        let views: Vec<PodView> = members
            .iter()
            .map(|p| {
                let mut v = self.assume(view(p), p);
                if v.job_id.is_some_and(|id| self.book.was_refit(id)) {
                    v.job_id = None;
                }
                if v.bound_node.is_none() {
                    v.volumes = self.storage.assess(p).gate;
                }
                v
            })
            .collect();
        let job = self.job_of(&views, &members);
        let views = self.with_fit(views, &members, &job);
        // The gang size needs the root object: read it only when a submission is possible, and
        // once (the submission uses the same reading).
        let root = match &job {
            JobView::None | JobView::Missing(_)
                if views.iter().any(|v| !v.gone() && v.bound_node.is_none()) =>
            {
                Some(
                    roots::facts(&self.client, &members[0])
                        .await
                        .map_err(|e| Failed {
                            action: "read_root",
                            message: e.to_string(),
                        })?,
                )
            }
            _ => None,
        };
        let workload = decide::Workload {
            pods: views,
            job,
            gang: root
                .as_ref()
                .map_or(decide::Gang::Size(1), |r| translate::gang_size(key, r)),
        };
        let actions = decide::decide(&workload);
        let mut reserved = self.reserve(&members, &actions)?;
        let applied = self
            .apply_all(key, &members, actions, root.as_ref(), &mut reserved)
            .await;
        if let Err(failed) = applied {
            // The bindings not made give their room back.
            for pod in &reserved {
                self.usage.release(pod);
            }
            return Err(failed);
        }
        if let JobView::Known {
            id,
            state: JobState::Pending,
            ..
        } = workload.job
        {
            self.exclude(id, &members).await;
        }
        if key.group == Group::PodGroup && self.config.pod_group_status {
            if let Some(r) = root.as_ref().filter(|r| r.missing_group.is_none()) {
                self.groups
                    .set_min_member(key, r.min_member.unwrap_or(1).max(1));
            }
            self.write_group_status(key, &members, root.is_some()).await;
        }
        Ok(())
    }

    /// Applies `actions` in order, but a run of bindings at once: a gang's pods are bound
    /// together, not one API round trip after another (its last pod waited ~0.8 s at scale).
    /// Each pod bound leaves `reserved`; the first failure ends the pass.
    async fn apply_all(
        &self,
        key: &WorkloadKey,
        members: &[Arc<Pod>],
        actions: Vec<Action>,
        root: Option<&RootFacts>,
        reserved: &mut BTreeSet<String>,
    ) -> Result<(), Failed> {
        // `<ns>/<pod>` of a binding.
        let bound = |a: &Action| match a {
            Action::Bind { pod, .. } => Some(format!("{}/{pod}", key.namespace)),
            _ => None,
        };
        let mut actions = actions.into_iter().peekable();
        while let Some(action) = actions.next() {
            let Some(first) = bound(&action) else {
                match (action, root) {
                    (Action::Submit { pods }, Some(root)) => {
                        self.submit(key, members, &pods, root).await?
                    }
                    (action, _) => self.apply(key, members, action).await?,
                }
                continue;
            };
            let mut binds = vec![(first, action)];
            while let Some(name) = actions.peek().and_then(bound) {
                binds.push((name, actions.next().expect("the action peeked at")));
            }
            let results =
                futures::future::join_all(binds.into_iter().map(|(name, bind)| async move {
                    (name, self.apply(key, members, bind).await)
                }))
                .await;
            let mut failed = None;
            for (name, result) in results {
                match result {
                    Ok(()) => {
                        reserved.remove(&name);
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Writes the PodGroup's status when it changed. Its size is read once (`root_read`: this
    /// pass read it already, and found no PodGroup); a failed write is logged and tried again
    /// on the next pass.
    async fn write_group_status(&self, key: &WorkloadKey, members: &[Arc<Pod>], root_read: bool) {
        let min = match self.groups.min_member(key) {
            Some(min) => min,
            None if root_read => return,
            None => match roots::facts(&self.client, &members[0]).await {
                Ok(facts) if facts.missing_group.is_none() => {
                    // As the gang size counts it.
                    let min = facts.min_member.unwrap_or(1).max(1);
                    self.groups.set_min_member(key, min);
                    min
                }
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(workload = %key, error = %e, "cannot read the PodGroup");
                    return;
                }
            },
        };
        let pods: Vec<&Pod> = members.iter().map(|p| &**p).collect();
        let status = pod_group::status(&pods, min);
        if !self.groups.needs_write(key, &status) {
            return;
        }
        let (group, version, kind, plural) = RootKind::PodGroup.gvk();
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &resource);
        let patch = Patch::Merge(serde_json::json!({ "status": &status }));
        match api
            .patch_status(&key.name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => {
                tracing::debug!(workload = %key, phase = status.phase, "wrote the PodGroup's status");
                self.groups.written(key, status);
            }
            // Deleted meanwhile: nothing to write.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(workload = %key, error = %e, "cannot write the PodGroup's status")
            }
        }
    }

    /// `views` with, for each unbound pod of a running job, the nodes of the job's allocation
    /// where Kubernetes would not admit it now (see [`feasible::unfit`]), beside everything
    /// bound there.
    fn with_fit(
        &self,
        mut views: Vec<PodView>,
        members: &[Arc<Pod>],
        job: &JobView,
    ) -> Vec<PodView> {
        let JobView::Known {
            state: JobState::Running,
            nodes,
            ..
        } = job
        else {
            return views;
        };
        let nodes: Vec<Arc<Node>> = nodes
            .iter()
            .filter_map(|(_, k8s)| self.nodes.get(&ObjectRef::new(k8s.as_deref()?)))
            .collect();
        for (view, pod) in views.iter_mut().zip(members) {
            if view.bound_node.is_some() || view.deleting.is_some() {
                continue;
            }
            for node in &nodes {
                let name = node.name_any();
                if let Some(why) = feasible::unfit(pod, node, &self.usage.on(&name).all()) {
                    view.unfit_on.insert(name, why);
                }
            }
        }
        views
    }

    /// Reserves room for the pass's bindings on their nodes, all or none (see
    /// [`Usage::reserve`]); returns the pods reserved. When another workload's pods took the
    /// room since the decision, nothing is bound: the pass fails, and the next one refits the
    /// job or waits.
    fn reserve(
        &self,
        members: &[Arc<Pod>],
        actions: &[Action],
    ) -> Result<BTreeSet<String>, Failed> {
        let binds: Vec<(&Pod, &str)> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Bind { pod, node, .. } => {
                    let pod = members.iter().find(|p| p.name_any() == *pod)?;
                    Some((&**pod, node.as_str()))
                }
                _ => None,
            })
            .collect();
        if binds.is_empty() {
            return Ok(BTreeSet::new());
        }
        let nodes: Vec<Option<Arc<Node>>> = binds
            .iter()
            .map(|(_, n)| self.nodes.get(&ObjectRef::new(n)))
            .collect();
        let keys: Vec<(String, &str, Requests)> = binds
            .iter()
            .map(|(p, n)| (pod_name(p), *n, Requests::of(p)))
            .collect();
        let reserved = keys.iter().map(|(k, _, _)| k.clone()).collect();
        self.usage
            .reserve(keys, |i, used| {
                feasible::unfit(binds[i].0, nodes[i].as_deref()?, used).map(|why| {
                    format!(
                        "{} no longer fits on {}: {why}",
                        pod_name(binds[i].0),
                        binds[i].1
                    )
                })
            })
            .map_err(|message| {
                self.metrics.action("bind", Some("unfit"));
                Failed {
                    action: "bind",
                    message,
                }
            })?;
        Ok(reserved)
    }

    /// Keeps pending job `id`'s excluded nodes what Kubernetes allows its pods now: a node
    /// tainted or cordoned after the submission is added, one usable again is taken out. Only
    /// Slurm nodes that exist count, so a name Slurm keeps for a deleted node does not bring an
    /// update per pass. A failed update is logged and tried again on the next pass; the
    /// workload's other actions do not wait on it.
    async fn exclude(&self, id: u32, members: &[Arc<Pod>]) {
        let (Some(current), Some(slurm_nodes)) =
            (self.book.exclusions(id), self.slurm_nodes.names())
        else {
            return;
        };
        let pods: Vec<&Pod> = members
            .iter()
            .filter(|p| {
                let v = view(p);
                !v.gone() && v.bound_node.is_none() && v.deleting.is_none()
            })
            .map(|p| &**p)
            .collect();
        if pods.is_empty() {
            return;
        }
        let wanted = self.excluded_for(&pods, &slurm_nodes);
        let Some(current) = feasible::exclusion_change(&wanted, current, &slurm_nodes) else {
            return;
        };
        let update = JobUpdate::default().excluded_nodes(wanted.iter().cloned());
        let result = self.slurm.update_job(id, &update).await;
        self.metrics.slurm_call("update_job", result.as_ref().err());
        match result {
            Ok(_) => {
                tracing::info!(job = id, excluded = %wanted.join(","), was = %current.join(","), "updated the pending job's excluded nodes");
                self.book.excluded(id, &wanted);
            }
            Err(e) => {
                tracing::warn!(job = id, error = %e, "cannot update the pending job's excluded nodes")
            }
        }
    }

    /// The Slurm nodes (of `slurm_nodes`) that Kubernetes does not allow for `pods` now:
    /// those the nodes rule out, and those the pods' volumes do.
    fn excluded_for(&self, pods: &[&Pod], slurm_nodes: &BTreeSet<String>) -> Vec<String> {
        let (by_nodes, by_volumes) = self.exclusions(pods, slurm_nodes);
        let mut all: BTreeSet<String> = by_nodes.into_iter().collect();
        all.extend(by_volumes.into_keys());
        all.into_iter().collect()
    }

    /// [`excluded_for`](Self::excluded_for)'s two parts; the volumes' with why.
    fn exclusions(
        &self,
        pods: &[&Pod],
        slurm_nodes: &BTreeSet<String>,
    ) -> (Vec<String>, BTreeMap<String, String>) {
        let nodes = self.nodes.state();
        let by_nodes = feasible::excluded_nodes(pods, &nodes, slurm_nodes, &self.usage.per_node());
        let assessed: Vec<Volumes> = pods.iter().map(|p| self.storage.assess(p)).collect();
        let by_volumes =
            volumes::excluded_nodes(&assessed, nodes.iter().map(|n| &**n), slurm_nodes);
        (by_nodes, by_volumes)
    }

    fn managed(&self, pod: &Pod) -> bool {
        pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
            == Some(self.config.scheduler_name.as_str())
    }

    /// The workload's job and what is known of it (see [`identify`]); a job not in the book
    /// yet is tracked, to be read.
    fn job_of(&self, views: &[PodView], members: &[Arc<Pod>]) -> JobView {
        let Some(source) =
            identify::job_source(views, |i| self.book.active_job_of(&pod_name(&members[i])))
        else {
            return JobView::None;
        };
        let entry = self.book.get(source.id);
        if entry.is_none() {
            self.book.track(source.id);
        }
        identify::job_view(source, entry.as_ref().map(|e| &e.seen), |s| {
            self.k8s_node(s)
        })
    }

    /// The Kubernetes node that Slurm node `slurm` stands for. Most carry the same name, so
    /// that one is looked up first: a pass over a workload does not walk every node.
    fn k8s_node(&self, slurm: &str) -> Option<String> {
        let same = self
            .nodes
            .get(&ObjectRef::new(slurm))
            .filter(|n| feasible::slurm_name(n) == slurm);
        same.or_else(|| {
            self.nodes
                .state()
                .into_iter()
                .find(|n| feasible::slurm_name(n) == slurm)
        })
        .map(|n| n.name_any())
    }

    async fn apply(
        &self,
        key: &WorkloadKey,
        members: &[Arc<Pod>],
        action: Action,
    ) -> Result<(), Failed> {
        let ns = key.namespace.as_str();
        let pod = |name: &str| members.iter().find(|p| p.name_any() == name).cloned();
        let kube_failed = |action: &'static str| {
            move |e: kube::Error| {
                self.metrics.action(action, Some("kube"));
                Failed {
                    action,
                    message: e.to_string(),
                }
            }
        };
        match action {
            // Submissions are made by `process`, which holds the root it read for the gang size.
            Action::Submit { .. } => {
                return Err(Failed {
                    action: "submit",
                    message: "a submission without the workload's root object".into(),
                });
            }
            Action::Label { pod: name, job_id } => {
                let Some(pod) = pod(&name) else {
                    return Ok(());
                };
                pods::label(&self.client, &pod, job_id)
                    .await
                    .map_err(kube_failed("label"))?;
                if let Some(uid) = pod.uid() {
                    self.assumed.labelled(&uid, job_id, Instant::now());
                }
                self.metrics.action("label", None);
            }
            Action::SelectNode {
                pod: name,
                node,
                claims,
            } => {
                for claim in &claims {
                    storage::select_node(&self.client, ns, claim, &node)
                        .await
                        .map_err(kube_failed("select_node"))?;
                }
                self.metrics.action("select_node", None);
                tracing::info!(pod = %format!("{ns}/{name}"), %node, claims = %claims.join(","), "gave the pod's claims its node");
                if let Some(p) = pod(&name) {
                    self.event(
                        &*p,
                        false,
                        "SelectedNode",
                        "Bind",
                        format!(
                            "claim(s) {} to be provisioned on {node} ({})",
                            claims.join(","),
                            volumes::SELECTED_NODE
                        ),
                    );
                }
            }
            Action::Bind {
                pod: name,
                node,
                job_id,
            } => {
                let sent = Instant::now();
                pods::bind(&self.client, ns, &name, &node)
                    .await
                    .map_err(kube_failed("bind"))?;
                let bound = Instant::now();
                self.metrics.action("bind", None);
                // From the moment this bridge saw the job start: the part of the pod's wait
                // that is the bridge's (and the API server's), not Slurm's.
                let after_start = self
                    .book
                    .start_seen(job_id)
                    .map(|seen| bound.saturating_duration_since(seen.into_std()));
                if let Some(after) = after_start {
                    self.metrics.bound_after_start(after.as_secs_f64());
                }
                tracing::info!(
                    pod = %format!("{ns}/{name}"),
                    %node,
                    job = job_id,
                    after_start_ms = after_start.map(|d| d.as_millis() as u64),
                    bind_ms = (bound - sent).as_millis() as u64,
                    "bound"
                );
                if let Some(p) = pod(&name) {
                    if let Some(uid) = p.uid() {
                        self.assumed.bound(&uid, &node, Instant::now());
                    }
                    if let Some(created) = p.creation_timestamp() {
                        let age = jiff::Timestamp::now().duration_since(created.0);
                        self.metrics.bound_after(age.as_secs_f64().max(0.0));
                    }
                    self.event(
                        &*p,
                        false,
                        "Scheduled",
                        "Bind",
                        format!("Slurm job {job_id} placed the pod on {node}"),
                    );
                }
            }
            Action::Refit {
                job_id,
                pods: names,
                node,
                why,
            } => {
                // The labels first: a bridge stopped between the two finds the job through its
                // admin_comment and refits it again, where the other order would leave pods
                // labelled with an ended job, which ends them.
                for name in &names {
                    pods::unlabel(&self.client, ns, name)
                        .await
                        .map_err(kube_failed("refit"))?;
                    if let Some(uid) = pod(name).and_then(|p| p.uid()) {
                        self.assumed.forget_label(&uid);
                    }
                }
                // Not cancelled: the next pass finds the job by its admin_comment, labels the
                // pods again and tries the refit again.
                self.cancel_job(job_id, "refit").await?;
                // Before the pod store shows the labels gone: a pass that still sees them must
                // not take the cancelled job as theirs (and end them with it).
                self.book.refitted(job_id);
                tracing::info!(job = job_id, %node, %why, workload = %key, "Slurm started the job where Kubernetes does not admit a pod: cancelled it, to submit again");
                let message = format!(
                    "Slurm job {job_id} placed the pod on {node}, where Kubernetes does not admit it ({why}): cancelled the job, to submit it again without that node"
                );
                for name in &names {
                    if let Some(p) = pod(name) {
                        self.event(&*p, true, "Refit", "Bind", message.clone());
                    }
                }
                let _ = self.book.refresh(&self.slurm, job_id).await;
                self.metrics.action("refit", None);
            }
            Action::Cancel { job_id, why } => {
                self.cancel_job(job_id, "cancel").await?;
                tracing::info!(job = job_id, %why, workload = %key, "cancelled the Slurm job");
                if let Some(p) = members.first() {
                    self.event(
                        &**p,
                        false,
                        "JobCancelled",
                        "Cancel",
                        format!("cancelled Slurm job {job_id}: {why}"),
                    );
                }
                let _ = self.book.refresh(&self.slurm, job_id).await;
                self.metrics.action("cancel", None);
            }
            Action::Delete { pod: name, why } => {
                if let Some(p) = pod(&name) {
                    self.event(&*p, true, "SlurmJobEnded", "Delete", why.clone());
                }
                tracing::info!(pod = %format!("{ns}/{name}"), %why, "deleting the pod");
                pods::delete(&self.client, ns, &name)
                    .await
                    .map_err(kube_failed("delete"))?;
                self.metrics.action("delete", None);
            }
            Action::Release { pod: name } => {
                if let Some(p) = pod(&name) {
                    pods::release(&self.client, &p)
                        .await
                        .map_err(kube_failed("release"))?;
                    self.metrics.action("release", None);
                }
            }
            Action::Condition {
                pod: name,
                status,
                reason,
                message,
            } => {
                pods::condition(&self.client, ns, &name, &status, &reason, &message)
                    .await
                    .map_err(kube_failed("condition"))?;
                if let Some(p) = pod(&name)
                    && status == "False"
                {
                    let warning = [
                        volumes::reasons::BINDING_TIMEOUT,
                        volumes::reasons::VOLUME_NODE_CONFLICT,
                    ]
                    .contains(&reason.as_str());
                    self.event(&*p, warning, &reason, "Schedule", message);
                }
            }
        }
        Ok(())
    }

    /// Builds and submits the job, records it (pending: the job follower sees it start) and
    /// labels the pods.
    async fn submit(
        &self,
        key: &WorkloadKey,
        members: &[Arc<Pod>],
        names: &[String],
        root: &RootFacts,
    ) -> Result<(), Failed> {
        let pods: Vec<&Pod> = members
            .iter()
            .filter(|p| names.contains(&p.name_any()))
            .map(|p| &**p)
            .collect();
        let Some(slurm_nodes) = self.slurm_nodes.names() else {
            return Err(Failed {
                action: "submit",
                message: "the Slurm node list has not been read yet".into(),
            });
        };
        let (by_nodes, by_volumes) = self.exclusions(&pods, &slurm_nodes);
        if let Some(message) = volumes::too_few_nodes(slurm_nodes.len(), &by_volumes, pods.len()) {
            for p in &pods {
                self.set_condition(p, volumes::reasons::VOLUME_NODE_CONFLICT, &message)
                    .await;
            }
            return Err(Failed {
                action: "submit",
                message,
            });
        }
        let excluded: Vec<String> = by_nodes
            .into_iter()
            .chain(by_volumes.into_keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if let Some(message) =
            feasible::too_few_nodes(slurm_nodes.len(), excluded.len(), pods.len())
        {
            for p in &pods {
                self.set_condition(p, "Unschedulable", &message).await;
            }
            return Err(Failed {
                action: UNSCHEDULABLE,
                message,
            });
        }
        let submission = translate::submission(
            Workload {
                key,
                pods: &pods,
                root,
            },
            &self.config,
            excluded,
        );
        let submission = match submission {
            Ok(s) => s,
            Err(invalid) => {
                let message = format!("cannot make a Slurm job: {invalid}");
                for p in &pods {
                    self.set_condition(p, "InvalidJob", &message).await;
                }
                return Err(Failed {
                    action: "submit",
                    message,
                });
            }
        };
        let result = self.slurm.submit_job(&submission).await;
        self.metrics.slurm_call("submit_job", result.as_ref().err());
        let id = match result {
            Ok(submitted) => submitted.into_value().job_id,
            Err(e) => {
                let message = format!("Slurm refused the job: {e}");
                for p in &pods {
                    self.set_condition(p, "SubmitFailed", &message).await;
                }
                self.metrics.action("submit", Some(e.label()));
                return Err(Failed {
                    action: "submit",
                    message,
                });
            }
        };
        self.metrics.action("submit", None);
        tracing::info!(job = id, workload = %key, pods = pods.len(), "submitted");
        let pod_names = jobs::sorted(pods.iter().map(|p| pod_name(p)));
        self.book.submitted(id, pod_names);
        // The pods' link to the job, and their finalizer. No event: the label names the job,
        // and the binding's event does again (as kube-scheduler, one event a pod placed; a
        // `Submitted` event a pod was a fifth of the bridge's writes at scale). A pod that lacks
        // the toleration of the bridge's node taint gets it with them, and its binding waits
        // for it: the workload's next pass comes after this one. One that has it (the bridge's
        // webhook gave it) is labelled in the background, so that a job Slurm starts at once
        // has its pods bound without waiting for their labels (0.3–0.6 s each at scale).
        let (waited, background): (Vec<&Pod>, Vec<&Pod>) =
            pods.iter().partition(|p| pods::needs_toleration(p));
        for p in background {
            self.label_in_background(p, id);
        }
        futures::future::try_join_all(waited.into_iter().map(|p| async move {
            pods::label(&self.client, p, id).await?;
            if let Some(uid) = p.uid() {
                self.assumed.labelled(&uid, id, Instant::now());
            }
            Ok::<_, kube::Error>(())
        }))
        .await
        .map_err(|e| Failed {
            action: "label",
            message: e.to_string(),
        })?;
        Ok(())
    }

    /// Labels `pod` with job `id` without waiting, the label assumed meanwhile; a failed label
    /// is forgotten, and a later pass (the job found by its admin_comment) labels it again.
    fn label_in_background(&self, pod: &Pod, id: u32) {
        let Some(uid) = pod.uid() else { return };
        self.assumed.labelled(&uid, id, Instant::now());
        let (client, assumed, metrics) = (
            self.client.clone(),
            Arc::clone(&self.assumed),
            Arc::clone(&self.metrics),
        );
        let pod = pod.clone();
        tokio::spawn(async move {
            if let Err(e) = pods::label(&client, &pod, id).await {
                assumed.forget_label(&uid);
                metrics.action("label", Some("kube"));
                tracing::warn!(pod = %pod_name(&pod), job = id, error = %e, "cannot label the pod; a later pass labels it again");
            }
        });
    }

    /// Cancels job `id` for `action`; a job already ended or gone is what a cancel wants.
    async fn cancel_job(&self, id: u32, action: &'static str) -> Result<(), Failed> {
        let result = self.slurm.cancel_job(id).await;
        self.metrics.slurm_call("cancel_job", result.as_ref().err());
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.is_job_already_ended() => Ok(()),
            Err(e) => Err(Failed {
                action,
                message: e.to_string(),
            }),
        }
    }

    async fn set_condition(&self, pod: &Pod, reason: &str, message: &str) {
        let current = view(pod).condition;
        if current
            .as_ref()
            .map(|(s, r, m)| (s.as_str(), r.as_str(), m.as_str()))
            == Some(("False", reason, message))
        {
            return;
        }
        let ns = pod.namespace().unwrap_or_default();
        if let Err(e) =
            pods::condition(&self.client, &ns, &pod.name_any(), "False", reason, message).await
        {
            tracing::warn!(error = %e, "cannot set the pod's condition");
        }
        self.event(pod, true, reason, "Submit", message.to_owned());
    }

    /// Cancels active bridge jobs none of whose pods exists any more (their pods were deleted
    /// while the bridge was away, or their finalizer was removed by hand).
    async fn cancel_orphans(&self) {
        let existing: BTreeSet<String> = self.pods.state().iter().map(|p| pod_name(p)).collect();
        for (id, pods) in self.book.active() {
            if pods.is_empty() || pods.iter().any(|p| existing.contains(p)) {
                continue;
            }
            let result = self.slurm.cancel_job(id).await;
            self.metrics.slurm_call("cancel_job", result.as_ref().err());
            match result {
                Ok(_) => {
                    tracing::info!(job = id, pods = ?pods, "cancelled an orphan job: none of its pods exists");
                    self.metrics.action("cancel_orphan", None);
                }
                Err(e) => tracing::warn!(job = id, error = %e, "cannot cancel an orphan job"),
            }
            let _ = self.book.refresh(&self.slurm, id).await;
        }
    }

    fn count_waiting(&self) {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for p in self.pods.state() {
            let v = view(&p);
            if v.bound_node.is_none() && !v.gone() {
                let reason = match (v.condition, v.job_id) {
                    (Some((_, r, _)), _) => r,
                    (None, Some(_)) => "Pending".into(),
                    (None, None) => "NoJob".into(),
                };
                *counts.entry(reason).or_default() += 1;
            }
        }
        self.metrics
            .set_waiting(&counts.into_iter().collect::<Vec<_>>());
    }

    /// `view` of `pod`, bound to the node this bridge bound it to and labelled with the job it
    /// labelled it with, where the store does not show those writes yet.
    fn assume(&self, mut view: PodView, pod: &Pod) -> PodView {
        let Some(uid) = pod.uid() else { return view };
        let now = Instant::now();
        if view.bound_node.is_some() {
            self.assumed.forget(&uid);
        } else {
            view.bound_node = self.assumed.node_of(&uid, now);
        }
        // The label written last wins over an older one the store still shows (a refit's
        // next job).
        match (view.job_id, self.assumed.job_of(&uid, now)) {
            (Some(shown), Some(written)) if shown == written => self.assumed.forget_label(&uid),
            (_, Some(written)) => {
                view.job_id = Some(written);
                view.finalizer = true;
            }
            _ => {}
        }
        view
    }

    /// Publishes an event without waiting for it.
    fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        kube_support::events::publish_detached(&self.recorder, obj, warning, reason, action, note)
    }
}

/// `<namespace>/<name>`.
pub fn pod_name(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// What the decisions need of `pod`.
pub fn view(pod: &Pod) -> PodView {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let phase = match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded" | "Failed") => Phase::Ended,
        Some("Running") => Phase::Running,
        _ => Phase::Pending,
    };
    let deleting = pod.metadata.deletion_timestamp.as_ref().map(|t| {
        let since = jiff::Timestamp::now().duration_since(t.0).as_secs();
        // deletionTimestamp is already "now + grace" when the deletion was asked for.
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        (since + grace, grace)
    });
    let condition = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == keys::SLURM_JOB_CONDITION));
    PodView {
        name: pod.name_any(),
        job_id: pod
            .labels()
            .get(keys::JOB_ID_LABEL)
            .and_then(|v| v.parse().ok()),
        assigned_node: pod.annotations().get(keys::SLURM_NODE_ANNOTATION).cloned(),
        bound_node: spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        phase,
        deleting,
        finalizer: pod.finalizers().iter().any(|f| f == keys::FINALIZER),
        condition: condition.map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        }),
        condition_age: condition
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| jiff::Timestamp::now().duration_since(t.0).as_secs()),
        volumes: decide::Gate::Ready,
        unfit_on: BTreeMap::new(),
    }
}
