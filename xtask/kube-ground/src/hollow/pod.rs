//! One pod on a hollow node: run as the test kubelet runs it, without containers. Its containers
//! start at once (init containers complete, sidecars and the main containers run, ready and
//! started: no probes), with the kubelet's `Started` events and status (a fake address from
//! [`super::ips`]); they exit after [`RUN_SECONDS`], with [`EXIT_CODE`], or run until the pod is
//! deleted; a deletion ends them at once (`Killing`, 137), then removes the object, as the
//! kubelet's worker does.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::runtime::events::{EventType, Recorder};
use kube_ground::runtime::PodRef;
use tokio::sync::watch;
use tokio::time::Instant;

use super::cost::Counters;
use super::ips::Ips;
use crate::kubelet::report::{self, StatusWriter};
use crate::kubelet::status::{Exit, PodRun, Record, Run};

/// How many seconds a hollow pod's containers run before they exit; without it they run until
/// the pod is deleted. Ignored when the restart policy is `Always` (the kubelet would start them
/// again: the pod of a Deployment runs until deleted).
pub const RUN_SECONDS: &str = "kube-ground.slurm-rs.dev/hollow-run-seconds";
/// The code they exit with then (default 0): a `Never` pod ends `Failed` with a nonzero one; an
/// `OnFailure` pod stays `Running` with its containers terminated (nothing restarts them).
pub const EXIT_CODE: &str = "kube-ground.slurm-rs.dev/hollow-exit-code";

/// What every hollow pod shares.
pub struct Ctx {
    pub client: Client,
    pub recorder: Recorder,
    pub host_ip: String,
    pub ips: Ips,
    pub counters: Arc<Counters>,
}

/// When and how a pod's containers end: after how long, with which code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ending {
    pub after: Duration,
    pub code: i32,
}

/// The ending the pod's annotations ask for, if any (a value that does not parse is ignored).
pub fn ending(pod: &Pod) -> Option<Ending> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    if policy == "Always" {
        return None;
    }
    let annotations = pod.metadata.annotations.as_ref()?;
    let secs: f64 = annotations.get(RUN_SECONDS)?.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    let code = annotations
        .get(EXIT_CODE)
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    Some(Ending {
        after: Duration::from_secs_f64(secs),
        code,
    })
}

struct Hollow {
    ctx: Arc<Ctx>,
    pod: Pod,
    pod_ref: PodRef,
    ip: Option<Ipv4Addr>,
    start: Timestamp,
    init: Vec<Record>,
    main: Vec<Record>,
    failed: Option<(String, String)>,
    status: StatusWriter,
}

/// Runs the pod whose latest object `updates` carries (`None` once it is gone from the API).
pub async fn run(ctx: Arc<Ctx>, mut updates: watch::Receiver<Option<Pod>>) {
    let Some(pod) = updates.borrow_and_update().clone() else {
        return;
    };
    ctx.counters.pods_started.fetch_add(1, Ordering::Relaxed);
    ctx.counters.pods_now.fetch_add(1, Ordering::Relaxed);
    let mut h = Hollow::new(ctx.clone(), pod);
    run_pod(&mut h, &mut updates).await;
    if let Some(ip) = h.ip {
        ctx.ips.release(ip);
    }
    ctx.counters.pods_now.fetch_sub(1, Ordering::Relaxed);
}

async fn run_pod(h: &mut Hollow, updates: &mut watch::Receiver<Option<Pod>>) {
    if ended(&h.pod) {
        // Ended before this process started (it restarted): left as it is until deleted.
        let deleting = |p: &Option<Pod>| {
            p.as_ref()
                .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
        };
        while !deleting(&updates.borrow_and_update()) {
            if updates.changed().await.is_err() || updates.borrow().is_none() {
                return;
            }
        }
        return report::delete(&h.ctx.client, &h.pod_ref).await;
    }
    if h.pod.metadata.deletion_timestamp.is_some() {
        return h.terminate(true).await;
    }
    h.start().await;
    let mut ends_at = ending(&h.pod).map(|e| (Instant::now() + e.after, e.code));
    loop {
        let end = async {
            match ends_at {
                Some((at, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = updates.changed() => {
                let latest = if changed.is_ok() { updates.borrow_and_update().clone() } else { None };
                match latest {
                    None => return h.terminate(false).await,
                    Some(p) if p.metadata.deletion_timestamp.is_some() => {
                        h.pod = p;
                        return h.terminate(true).await;
                    }
                    Some(p) => {
                        h.pod = p;
                        h.push_status().await;
                    }
                }
            }
            () = end => {
                let (_, code) = ends_at.take().expect("set while waiting");
                h.exit(code).await;
            }
        }
    }
}

fn ended(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

fn sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

impl Hollow {
    fn new(ctx: Arc<Ctx>, pod: Pod) -> Hollow {
        let spec = pod.spec.clone().unwrap_or_default();
        let record = |c: &Container| Record::new(&c.name, c.image.as_deref().unwrap_or_default());
        Hollow {
            pod_ref: report::pod_ref(&pod),
            init: spec.init_containers.iter().flatten().map(record).collect(),
            main: spec.containers.iter().map(record).collect(),
            ctx,
            pod,
            ip: None,
            start: Timestamp::now(),
            failed: None,
            status: StatusWriter::default(),
        }
    }

    /// Every container started, in the kubelet's order: init containers (completed at once,
    /// sidecars left running), then the main ones.
    async fn start(&mut self) {
        let shown = self.pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
        self.ip = self.ctx.ips.take(shown);
        if self.ip.is_none() {
            self.failed = Some((
                "OutOfAddresses".into(),
                "hollow nodes have no pod address left".into(),
            ));
            self.push_status().await;
            return;
        }
        let specs = self.pod.spec.clone().unwrap_or_default();
        let init = specs.init_containers.iter().flatten();
        let now = Timestamp::now();
        for (r, c) in self.init.iter_mut().zip(init) {
            r.run = if sidecar(c) {
                Run::Running { since: now }
            } else {
                Run::Exited(Exit {
                    code: 0,
                    reason: "Completed".into(),
                    started: now,
                    finished: now,
                    message: String::new(),
                })
            };
            r.started = sidecar(c);
            r.ready = sidecar(c);
        }
        for r in &mut self.main {
            r.run = Run::Running { since: now };
            r.started = true;
            r.ready = true;
        }
        let names: Vec<String> = self
            .init
            .iter()
            .chain(self.main.iter())
            .map(|r| r.name.clone())
            .collect();
        for name in names {
            self.event(
                EventType::Normal,
                "Started",
                &format!("Started container {name}"),
            )
            .await;
        }
        self.push_status().await;
    }

    /// The main containers exit with `code`; when the pod is over by that, its sidecars stop.
    async fn exit(&mut self, code: i32) {
        let now = Timestamp::now();
        for r in &mut self.main {
            if let Run::Running { since } = r.run {
                r.run = Run::Exited(Exit {
                    code,
                    reason: if code == 0 { "Completed" } else { "Error" }.into(),
                    started: since,
                    finished: now,
                    message: String::new(),
                });
                r.ready = false;
            }
        }
        let policy = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref());
        if policy == Some("Never") || code == 0 {
            for r in self
                .init
                .iter_mut()
                .filter(|r| matches!(r.run, Run::Running { .. }))
            {
                r.run = Run::Exited(Exit {
                    code: 0,
                    reason: "Completed".into(),
                    started: now,
                    finished: now,
                    message: String::new(),
                });
                r.ready = false;
            }
        }
        tracing::debug!(pod = %self.pod_ref, code, "containers exited");
        self.push_status().await;
    }

    async fn terminate(&mut self, in_api: bool) {
        if !in_api {
            return;
        }
        let running = self
            .init
            .iter()
            .chain(self.main.iter())
            .any(|r| matches!(r.run, Run::Running { .. }));
        if running {
            self.event(
                EventType::Normal,
                "Killing",
                "Stopping the pod's containers",
            )
            .await;
        }
        report::kill_running(self.init.iter_mut().chain(self.main.iter_mut()));
        if self.failed.is_none() {
            self.failed = report::deletion_failure(self.main.iter());
        }
        self.ip = self.ip.take().inspect(|ip| self.ctx.ips.release(*ip));
        self.push_status().await;
        report::delete(&self.ctx.client, &self.pod_ref).await;
    }

    async fn event(&self, type_: EventType, reason: &str, note: &str) {
        report::event(&self.ctx.recorder, &self.pod, type_, reason, note).await;
    }

    async fn push_status(&mut self) {
        let run = PodRun {
            ip: self.ip.map(|ip| ip.to_string()),
            host_ip: Some(self.ctx.host_ip.clone()),
            start: Some(self.start),
            init: self.init.clone(),
            containers: self.main.clone(),
            failed: self.failed.clone(),
        };
        self.status
            .push(&self.ctx.client, &mut self.pod, &run)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(policy: &str, annotations: &[(&str, &str)]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p",
                "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
            },
            "spec": {"restartPolicy": policy, "containers": [{"name": "c"}]},
        }))
        .unwrap()
    }

    #[test]
    fn endings_come_from_the_annotations() {
        assert_eq!(ending(&pod("Never", &[])), None);
        assert_eq!(
            ending(&pod("Never", &[(RUN_SECONDS, "2.5")])),
            Some(Ending {
                after: Duration::from_millis(2500),
                code: 0
            })
        );
        assert_eq!(
            ending(&pod("OnFailure", &[(RUN_SECONDS, "3"), (EXIT_CODE, "2")])),
            Some(Ending {
                after: Duration::from_secs(3),
                code: 2
            })
        );
        assert_eq!(ending(&pod("Always", &[(RUN_SECONDS, "3")])), None);
        assert_eq!(ending(&pod("Never", &[(RUN_SECONDS, "soon")])), None);
        assert_eq!(ending(&pod("Never", &[(RUN_SECONDS, "-1")])), None);
    }
}
