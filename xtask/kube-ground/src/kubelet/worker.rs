//! One pod's life on its node, as the kubelet's pod worker runs it: sandbox and volumes, init
//! containers in order (restartable ones stay as sidecars), the containers, restarts with
//! back-off, probes, status, and deletion (preStop, SIGTERM, SIGKILL after the grace period,
//! then the pod object is removed).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::runtime::events::{EventType, Recorder};
use kube_ground::net::{Network, Sandbox};
use kube_ground::runtime::{ContainerRef, PodRef, Runtime};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::container::{self, PodParts};
use super::probes::{Kind, Prober};
use super::refs::Refs;
use super::report::{self, StatusWriter};
use super::status::{Exit, PodRun, Record, Run};
use super::volumes::{self, HostVolume};
use super::{env, hosts, images};

/// What every pod worker shares.
pub struct Ctx {
    pub client: Client,
    pub runtime: Runtime,
    pub network: Network,
    pub recorder: Recorder,
    /// Each pod's files: `<pods_dir>/<uid>/`.
    pub pods_dir: PathBuf,
    pub claims_dir: PathBuf,
    pub ca_crt: Vec<u8>,
    /// The tokens pods' service account volumes carry. Never logged.
    pub tokens: super::tokens::Tokens,
    pub host_ip: String,
    /// The OCI image layout images are copied from.
    pub image_layout: PathBuf,
    /// The watched ConfigMaps and Secrets running pods' volumes show.
    pub sources: super::sources::Sources,
}

const BACKOFF_START: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
const RETRY_SETUP: Duration = Duration::from_secs(5);

struct Slot {
    c: Container,
    sidecar: bool,
    attempt: u32,
    record: Record,
    probers: Vec<Prober>,
    not_before: Instant,
    backoff: Duration,
    started_at: Option<Instant>,
}

impl Slot {
    fn new(c: &Container, sidecar: bool) -> Slot {
        Slot {
            record: Record::new(&c.name, c.image.as_deref().unwrap_or_default()),
            c: c.clone(),
            sidecar,
            attempt: 0,
            probers: Vec::new(),
            not_before: Instant::now(),
            backoff: BACKOFF_START,
            started_at: None,
        }
    }

    fn running(&self) -> bool {
        matches!(self.record.run, Run::Running { .. })
    }
}

struct Worker {
    ctx: Arc<Ctx>,
    pod: Pod,
    pod_ref: PodRef,
    dir: PathBuf,
    sandbox: Option<Sandbox>,
    volumes: BTreeMap<String, HostVolume>,
    service_account: Option<HostVolume>,
    init: Vec<Slot>,
    main: Vec<Slot>,
    start: Timestamp,
    failed: Option<(String, String)>,
    finished: bool,
    exits_tx: mpsc::Sender<(String, u32)>,
    status: StatusWriter,
}

/// Runs the pod whose latest object `updates` carries (`None` once it is gone from the API).
pub async fn run(ctx: Arc<Ctx>, mut updates: watch::Receiver<Option<Pod>>) {
    let Some(pod) = updates.borrow_and_update().clone() else {
        return;
    };
    let (exits_tx, mut exits) = mpsc::channel(16);
    // Before the setup reads the pod's objects: a change after that read wakes the loop below.
    let sources = ctx.sources.register(&pod);
    let mut w = Worker::new(ctx, pod, exits_tx);
    tracing::info!(pod = %w.pod_ref, "starting pod");
    loop {
        if w.pod.metadata.deletion_timestamp.is_some() {
            return w.terminate(true).await;
        }
        match w.setup().await {
            Ok(()) => break,
            Err(e) => {
                let message = format!("{e:#}");
                tracing::warn!(pod = %w.pod_ref, "pod setup failed: {message}");
                for slot in w.init.iter_mut().chain(w.main.iter_mut()) {
                    slot.record.run = Run::Waiting {
                        reason: "CreateContainerConfigError".into(),
                        message: message.clone(),
                    };
                }
                w.event(EventType::Warning, "FailedMount", &message).await;
                w.push_status().await;
            }
        }
        tokio::select! {
            changed = updates.changed() => {
                let gone = changed.is_err() || updates.borrow().is_none();
                if gone {
                    return w.terminate(false).await;
                }
                w.pod = updates.borrow_and_update().clone().expect("checked above");
            }
            _ = tokio::time::sleep(RETRY_SETUP) => {}
        }
    }
    loop {
        w.step().await;
        w.push_status().await;
        let wake = w.next_wake();
        tokio::select! {
            changed = updates.changed() => {
                let latest = if changed.is_ok() { updates.borrow_and_update().clone() } else { None };
                match latest {
                    None => return w.terminate(false).await,
                    Some(p) if p.metadata.deletion_timestamp.is_some() => {
                        w.pod = p;
                        return w.terminate(true).await;
                    }
                    Some(p) => w.pod = p,
                }
            }
            Some((name, attempt)) = exits.recv() => w.on_exit(&name, attempt).await,
            () = sources.notify.notified() => w.refresh_volumes(),
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

impl Worker {
    fn new(ctx: Arc<Ctx>, pod: Pod, exits_tx: mpsc::Sender<(String, u32)>) -> Worker {
        let spec = pod.spec.clone().unwrap_or_default();
        let pod_ref = report::pod_ref(&pod);
        let init = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| Slot::new(c, c.restart_policy.as_deref() == Some("Always")))
            .collect();
        let main = spec
            .containers
            .iter()
            .map(|c| Slot::new(c, false))
            .collect();
        Worker {
            dir: ctx.pods_dir.join(&pod_ref.uid),
            ctx,
            pod,
            pod_ref,
            sandbox: None,
            volumes: BTreeMap::new(),
            service_account: None,
            init,
            main,
            start: Timestamp::now(),
            failed: None,
            finished: false,
            exits_tx,
            status: StatusWriter::default(),
        }
    }

    /// The sandbox, /etc/hosts, resolv.conf and volumes; safe to repeat after a failure.
    async fn setup(&mut self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        if self.sandbox.is_none() {
            let sandbox = self
                .ctx
                .network
                .create(&self.pod_ref)
                .await
                .context("creating the pod sandbox")?;
            self.sandbox = Some(sandbox);
        }
        let ip = self.sandbox.as_ref().expect("made above").ip.to_string();
        std::fs::write(self.dir.join("hosts"), hosts::etc_hosts(&self.pod, &ip))?;
        std::fs::write(self.dir.join("resolv.conf"), hosts::resolv_conf(&self.pod))?;
        let refs = Refs::fetch(&self.ctx.client, &self.pod).await?;
        let token = self.ctx.tokens.token(
            self.pod.metadata.namespace.as_deref().unwrap_or("default"),
            self.pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.as_deref())
                .unwrap_or("default"),
        )?;
        let inputs = volumes::Inputs {
            refs: &refs,
            pod_dir: &self.dir,
            claims_dir: &self.ctx.claims_dir,
            token: &token,
            ca_crt: &self.ctx.ca_crt,
        };
        self.volumes = volumes::prepare(&self.pod, &inputs)?;
        let automount = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.automount_service_account_token)
            .unwrap_or(true);
        self.service_account = if automount {
            Some(volumes::service_account(&self.pod, &inputs)?)
        } else {
            None
        };
        // The env of every container is checked before anything starts.
        for slot in self.init.iter().chain(self.main.iter()) {
            env::build(&self.pod, &slot.c, &refs)
                .with_context(|| format!("container {:?}", slot.c.name))?;
        }
        Ok(())
    }

    /// Writes the pod's ConfigMap and Secret volumes again, from the kubelet's stores, where
    /// those objects changed (one of them did: [`super::sources`] woke the worker); a failure is
    /// logged and the files stay as they were (the object's next change tries again).
    fn refresh_volumes(&mut self) {
        if self.finished || self.sandbox.is_none() || !volumes::has_refreshed(&self.pod) {
            return;
        }
        let result = {
            let refs = self.ctx.sources.refs(&self.pod);
            let inputs = volumes::Inputs {
                refs: &refs,
                pod_dir: &self.dir,
                claims_dir: &self.ctx.claims_dir,
                token: "",
                ca_crt: &self.ctx.ca_crt,
            };
            volumes::refresh(&self.pod, &inputs)
        };
        match result {
            Ok(changed) if !changed.is_empty() => {
                tracing::info!(pod = %self.pod_ref, volumes = ?changed, "volumes updated");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(pod = %self.pod_ref, "volume refresh failed: {e:#}"),
        }
    }

    fn restart_policy(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("Always")
    }

    /// Starts what is due and probes what is running.
    async fn step(&mut self) {
        if self.finished {
            return;
        }
        let now = Instant::now();
        let policy = self.restart_policy().to_string();
        let mut init_done = true;
        for i in 0..self.init.len() {
            let slot = &self.init[i];
            let wait_here = if slot.sidecar {
                match &slot.record.run {
                    Run::Running { .. } => !slot.record.started,
                    _ => {
                        if now >= slot.not_before {
                            self.start_container(true, i).await;
                        }
                        true
                    }
                }
            } else {
                match &slot.record.run {
                    Run::Exited(e) if e.code == 0 => false,
                    Run::Running { .. } => true,
                    Run::Exited(_) if policy == "Never" => {
                        self.finish().await;
                        return;
                    }
                    _ => {
                        if now >= slot.not_before {
                            self.start_container(true, i).await;
                        }
                        true
                    }
                }
            };
            if wait_here {
                init_done = false;
                break;
            }
        }
        if init_done {
            for i in 0..self.main.len() {
                let slot = &self.main[i];
                let start = match &slot.record.run {
                    Run::Waiting { .. } => true,
                    Run::Exited(e) => policy == "Always" || (policy == "OnFailure" && e.code != 0),
                    Run::Running { .. } => false,
                };
                if start && now >= slot.not_before {
                    self.start_container(false, i).await;
                }
            }
            let all_done = !self.main.is_empty()
                && self.main.iter().all(|s| match &s.record.run {
                    Run::Exited(e) => policy == "Never" || (policy == "OnFailure" && e.code == 0),
                    _ => false,
                });
            if all_done {
                self.finish().await;
                return;
            }
        }
        self.probe_all().await;
    }

    async fn start_container(&mut self, init: bool, i: usize) {
        let slot = if init {
            &mut self.init[i]
        } else {
            &mut self.main[i]
        };
        if let Run::Exited(e) = &slot.record.run {
            slot.record.last = Some(e.clone());
            slot.record.restarts += 1;
            slot.attempt += 1;
        }
        let c = slot.c.clone();
        let attempt = slot.attempt;
        let result = self.create(&c, attempt).await;
        let slot = if init {
            &mut self.init[i]
        } else {
            &mut self.main[i]
        };
        match result {
            Ok(()) => {
                let now = Instant::now();
                slot.record.run = Run::Running {
                    since: Timestamp::now(),
                };
                slot.started_at = Some(now);
                slot.probers = Prober::for_container(&c, now);
                let has = |k| slot.probers.iter().any(|p| p.kind == k);
                slot.record.started = !has(Kind::Startup);
                slot.record.ready = slot.record.started && !has(Kind::Readiness);
                self.event(
                    EventType::Normal,
                    "Started",
                    &format!("Started container {}", c.name),
                )
                .await;
            }
            Err(e) => {
                let message = format!("{e:#}");
                let reason = if message.contains("ErrImageNeverPull") {
                    "ErrImageNeverPull"
                } else {
                    "CreateContainerError"
                };
                tracing::warn!(pod = %self.pod_ref, container = %c.name, "{message}");
                slot.record.run = Run::Waiting {
                    reason: reason.into(),
                    message: message.clone(),
                };
                slot.not_before = Instant::now() + RETRY_SETUP;
                self.event(EventType::Warning, "Failed", &message).await;
            }
        }
    }

    async fn create(&self, c: &Container, attempt: u32) -> Result<()> {
        let image = images::normalize(c.image.as_deref().unwrap_or_default());
        images::ensure(&self.ctx.runtime, &self.ctx.image_layout, &image).await?;
        let refs = Refs::fetch(&self.ctx.client, &self.pod).await?;
        let env = env::build(&self.pod, c, &refs)?;
        let sandbox = self.sandbox.as_ref().context("no sandbox")?;
        let hosts_file = self.dir.join("hosts");
        let resolv_conf = self.dir.join("resolv.conf");
        let parts = PodParts {
            pod: &self.pod,
            sandbox,
            volumes: &self.volumes,
            service_account: self.service_account.as_ref(),
            hosts_file: &hosts_file,
            resolv_conf: &resolv_conf,
        };
        let mut spec = container::spec(&parts, c, env)?;
        spec.image = image;
        let id = self.container_ref(&c.name, attempt);
        self.ctx.runtime.start(&id, &spec).await?;
        let runtime = self.ctx.runtime.clone();
        let tx = self.exits_tx.clone();
        let name = c.name.clone();
        tokio::spawn(async move {
            let _ = runtime.wait(&id).await;
            let _ = tx.send((name, attempt)).await;
        });
        Ok(())
    }

    fn container_ref(&self, name: &str, attempt: u32) -> ContainerRef {
        ContainerRef {
            pod: self.pod_ref.clone(),
            container: name.into(),
            attempt,
        }
    }

    async fn on_exit(&mut self, name: &str, attempt: u32) {
        let id = self.container_ref(name, attempt);
        let status = self.ctx.runtime.status(&id).await.ok().flatten();
        let Some(slot) = self
            .init
            .iter_mut()
            .chain(self.main.iter_mut())
            .find(|s| s.c.name == name && s.attempt == attempt)
        else {
            return;
        };
        let Run::Running { since } = slot.record.run else {
            return;
        };
        let code = status.as_ref().map(|s| s.exit_code).unwrap_or(-1);
        let parse = |t: Option<&String>| t.and_then(|t| t.parse::<Timestamp>().ok());
        let exit = Exit {
            code,
            reason: match (code, status.as_ref().is_some_and(|s| s.oom_killed)) {
                (_, true) => "OOMKilled".into(),
                (0, _) => "Completed".into(),
                _ => "Error".into(),
            },
            started: parse(status.as_ref().and_then(|s| s.started_at.as_ref())).unwrap_or(since),
            finished: parse(status.as_ref().and_then(|s| s.finished_at.as_ref()))
                .unwrap_or_else(Timestamp::now),
            message: String::new(),
        };
        let ran = slot.started_at.map(|s| s.elapsed()).unwrap_or_default();
        if ran > Duration::from_secs(600) {
            slot.backoff = BACKOFF_START;
        }
        slot.not_before = Instant::now() + slot.backoff;
        slot.backoff = (slot.backoff * 2).min(BACKOFF_MAX);
        slot.record.run = Run::Exited(exit);
        slot.record.ready = false;
        slot.probers.clear();
        tracing::info!(pod = %self.pod_ref, container = name, code, "container exited");
    }

    async fn probe_all(&mut self) {
        let Some(sandbox) = self.sandbox.clone() else {
            return;
        };
        let ip = sandbox.ip.to_string();
        let now = Instant::now();
        let mut unhealthy = Vec::new();
        for (init, i) in (0..self.init.len())
            .map(|i| (true, i))
            .chain((0..self.main.len()).map(|i| (false, i)))
        {
            let slot = if init { &self.init[i] } else { &self.main[i] };
            if !slot.running() {
                continue;
            }
            let id = self.container_ref(&slot.c.name, slot.attempt);
            let started = slot.record.started;
            let mut results = Vec::new();
            for (k, p) in slot.probers.iter().enumerate() {
                // Readiness and liveness wait for the startup probe, as in Kubernetes.
                if !p.due(now) || (p.kind != Kind::Startup && !started) {
                    continue;
                }
                if p.kind == Kind::Startup && started {
                    continue;
                }
                let ok = p
                    .run(&self.ctx.runtime, &id, &slot.c, &ip, &sandbox.netns)
                    .await;
                results.push((k, ok));
            }
            let slot = if init {
                &mut self.init[i]
            } else {
                &mut self.main[i]
            };
            for (k, ok) in results {
                let p = &mut slot.probers[k];
                let kind = p.kind;
                if let Some(verdict) = p.record(ok, Instant::now()) {
                    tracing::info!(pod = %self.pod_ref, container = %slot.c.name, "{kind:?} probe: {}",
                        if verdict { "success" } else { "failure" });
                    match (kind, verdict) {
                        (Kind::Startup, true) => {
                            slot.record.started = true;
                            slot.record.ready =
                                !slot.probers.iter().any(|p| p.kind == Kind::Readiness);
                        }
                        (Kind::Readiness, v) => slot.record.ready = v,
                        (Kind::Startup | Kind::Liveness, false) => {
                            unhealthy.push((id.clone(), kind));
                        }
                        (Kind::Liveness, true) => {}
                    }
                }
            }
        }
        for (id, kind) in unhealthy {
            self.event(
                EventType::Warning,
                "Unhealthy",
                &format!(
                    "{kind:?} probe failed: container {} will be restarted",
                    id.container
                ),
            )
            .await;
            let grace = self.grace();
            if let Err(e) = self.ctx.runtime.stop(&id, grace).await {
                tracing::warn!("{e:#}");
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let mut wake = Instant::now() + Duration::from_secs(10);
        for slot in self.init.iter().chain(self.main.iter()) {
            if !slot.running() {
                wake = wake.min(slot.not_before.max(Instant::now()));
            }
            for p in &slot.probers {
                wake = wake.min(p_next(p));
            }
        }
        wake.max(Instant::now() + Duration::from_millis(100))
    }

    fn grace(&self) -> Duration {
        let secs = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(secs.max(0) as u64)
    }

    /// The pod has run to its end: sidecars are stopped, the status is final.
    async fn finish(&mut self) {
        self.finished = true;
        let grace = self.grace();
        for slot in self.init.iter().rev().filter(|s| s.sidecar && s.running()) {
            let id = self.container_ref(&slot.c.name, slot.attempt);
            let _ = self.ctx.runtime.stop(&id, grace).await;
        }
        for slot in self.init.iter_mut().filter(|s| s.sidecar && s.running()) {
            slot.record.run = Run::Exited(Exit {
                code: 0,
                reason: "Completed".into(),
                started: Timestamp::now(),
                finished: Timestamp::now(),
                message: String::new(),
            });
            slot.record.ready = false;
        }
        tracing::info!(pod = %self.pod_ref, "pod finished");
    }

    /// Deletion as the kubelet does it: preStop hooks, SIGTERM, SIGKILL once the grace period is
    /// over, containers and sandbox removed, then the object deleted (when it still exists).
    async fn terminate(mut self, in_api: bool) {
        let grace = self.grace();
        let deadline = Instant::now() + grace;
        tracing::info!(pod = %self.pod_ref, ?grace, "stopping pod");
        let mains: Vec<ContainerRef> = self
            .main
            .iter()
            .filter(|s| s.running())
            .map(|s| self.container_ref(&s.c.name, s.attempt))
            .collect();
        let sidecars: Vec<ContainerRef> = self
            .init
            .iter()
            .rev()
            .filter(|s| s.running())
            .map(|s| self.container_ref(&s.c.name, s.attempt))
            .collect();
        if !mains.is_empty() || !sidecars.is_empty() {
            self.event(
                EventType::Normal,
                "Killing",
                "Stopping the pod's containers",
            )
            .await;
        }
        for group in [mains, sidecars] {
            let stops = group.iter().map(|id| self.stop_one(id, deadline));
            futures::future::join_all(stops).await;
        }
        if let Err(e) = self.ctx.runtime.remove_pod(&self.pod_ref).await {
            tracing::warn!(pod = %self.pod_ref, "removing containers: {e:#}");
        }
        if let Err(e) = self.ctx.network.destroy(&self.pod_ref.uid).await {
            tracing::warn!(pod = %self.pod_ref, "removing the sandbox: {e:#}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if in_api {
            self.end_for_deletion().await;
            report::delete(&self.ctx.client, &self.pod_ref).await;
        }
        self.sandbox = None;
        tracing::info!(pod = %self.pod_ref, "pod removed");
    }

    /// Marks every container that ran as ended (killed: 137) and pushes the pod's final status:
    /// Succeeded when every container had already exited 0, Failed otherwise.
    async fn end_for_deletion(&mut self) {
        report::kill_running(
            self.init
                .iter_mut()
                .chain(self.main.iter_mut())
                .map(|s| &mut s.record),
        );
        if self.failed.is_none() {
            self.failed = report::deletion_failure(self.main.iter().map(|s| &s.record));
        }
        self.sandbox = None;
        self.push_status().await;
    }

    async fn stop_one(&self, id: &ContainerRef, deadline: Instant) {
        let slot = self
            .init
            .iter()
            .chain(self.main.iter())
            .find(|s| s.c.name == id.container);
        if let Some(exec) = slot
            .and_then(|s| s.c.lifecycle.as_ref())
            .and_then(|l| l.pre_stop.as_ref())
            .and_then(|h| h.exec.as_ref())
        {
            let cmd = exec.command.clone().unwrap_or_default();
            let _ = tokio::time::timeout_at(deadline, self.ctx.runtime.exec(id, &cmd)).await;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if let Err(e) = self.ctx.runtime.stop(id, left).await {
            tracing::warn!(pod = %self.pod_ref, "{e:#}");
        }
    }

    async fn event(&self, type_: EventType, reason: &str, note: &str) {
        report::event(&self.ctx.recorder, &self.pod, type_, reason, note).await;
    }

    /// Writes the status when it changed.
    async fn push_status(&mut self) {
        let run = PodRun {
            ip: self.sandbox.as_ref().map(|s| s.ip.to_string()),
            host_ip: Some(self.ctx.host_ip.clone()),
            start: Some(self.start),
            init: self.init.iter().map(|s| s.record.clone()).collect(),
            containers: self.main.iter().map(|s| s.record.clone()).collect(),
            failed: self.failed.clone(),
        };
        self.status
            .push(&self.ctx.client, &mut self.pod, &run)
            .await;
    }
}

fn p_next(p: &Prober) -> Instant {
    // Due now or at its next period: sleeping until the earliest keeps probes on time.
    let now = Instant::now();
    if p.due(now) {
        now
    } else {
        now + Duration::from_millis(500)
    }
}
