//! `cargo xtask demo`: the whole system on this machine, deployed as a user deploys it. On the
//! Kubernetes test ground (started if needed), with the project's images and real Helm: the CRDs
//! and the operator, a Slurm 26.05 cluster from the `slurm` chart (custom resources the operator
//! turns into pods), the exporter, and the bridge with a pod that Slurm schedules; and a Prometheus
//! scraping them all through their ServiceMonitors ([`super::prometheus`]). It prints what to look
//! at and leaves everything running; `--down` uninstalls it.
//!
//! The values are `xtask/deploy/*.yaml`, the ones the Helm end-to-end test installs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::kube::ground;
use crate::kube::state::State;

/// Namespaces of the demo.
const OPERATOR_NS: &str = "slinky";
const SLURM_NS: &str = "slurm";
/// Where pods are scheduled by Slurm through the bridge.
const WORK_NS: &str = "slurm-work";
const EXTERNAL_NODE: &str = "scheduler.slinky.slurm.net/external-node";
/// prometheus-operator's ServiceMonitor kind, as the test ground has it (no registry here brings
/// the real CRD).
const SERVICE_MONITOR_CRD: &str = "xtask/deploy/servicemonitor-crd.yaml";
/// The bridge's taint on Slurm's nodes.
const MANAGED_NODE: &str = "slinky.slurm.net/managed-node";

#[derive(Debug, clap::Args)]
pub struct StackArgs {
    /// Uninstall what the demo installed (the ground keeps running: `cargo xtask kube down`).
    #[arg(long)]
    down: bool,
}

pub fn run(workspace: &Path, args: &StackArgs) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the demo needs root (the Kubernetes test ground and the image builder do)");
    }
    let state = match ground::running()? {
        Some(state) => {
            step("using the running Kubernetes test ground");
            state
        }
        None if args.down => {
            bail!("the Kubernetes test ground is not running: nothing to uninstall")
        }
        None => {
            step(
                "starting the Kubernetes test ground (3 nodes; the first time builds its API server)",
            );
            let shape = ground::Shape {
                nodes: 3,
                slurm: None,
                hollow: None,
            };
            ground::up(&shape, workspace)?.0
        }
    };
    let d = Demo {
        workspace: workspace.to_owned(),
        state,
    };
    if args.down {
        return d.down();
    }
    d.up()
}

fn step(what: &str) {
    eprintln!("==> {what}");
}

struct Demo {
    workspace: PathBuf,
    state: State,
}

impl Demo {
    fn up(&self) -> Result<()> {
        // Dev-profile images link on what building xtask compiled: minutes, not a release build.
        step(
            "the project's images (cargo xtask image project --dev; release images: without --dev)",
        );
        let ok = Command::new(crate::THIS_BINARY)
            .current_dir(&self.workspace)
            .args(["image", "project", "--dev"])
            .status()?
            .success();
        if !ok {
            bail!("building the project's images failed");
        }

        step(
            "prometheus-operator's ServiceMonitor kind (a stand-in CRD), so that every chart makes its own",
        );
        let crd = std::fs::read_to_string(self.workspace.join(SERVICE_MONITOR_CRD))?;
        self.apply("default", &crd)?;
        self.kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/servicemonitors.monitoring.coreos.com",
            "--timeout=60s",
        ])?;

        step("CRDs and the operator (helm upgrade --install)");
        self.helm_install(
            "slurm-operator-crds",
            "slurm-operator/charts/slurm-operator-crds",
            "default",
            &[] as &[&str],
        )?;
        self.helm_install(
            "slurm-operator",
            "slurm-operator/charts/slurm-operator",
            OPERATOR_NS,
            &["--wait", "--set", "operator.serviceMonitor.enabled=true"],
        )?;

        step(
            "a Slurm cluster from the slurm chart (the operator makes its pods), slurmctld's metrics on",
        );
        let mut slurm = self.values("slurm.yaml");
        slurm.extend(
            [
                "--set",
                "controller.metrics.enabled=true",
                "--set",
                "controller.metrics.serviceMonitor.enabled=true",
            ]
            .map(String::from),
        );
        self.helm_install("slurm", "slurm-operator/charts/slurm", SLURM_NS, &slurm)?;
        for (selector, n) in [
            ("app.kubernetes.io/name=slurmctld", 1),
            ("app.kubernetes.io/name=slurmrestd", 1),
            ("app.kubernetes.io/name=slurmd", 2),
        ] {
            self.wait_ready(SLURM_NS, selector, n, Duration::from_secs(300))?;
        }

        step("the exporter");
        let mut exporter = self.values("exporter.yaml");
        exporter.extend(["--wait", "--set", "serviceMonitor.enabled=true"].map(String::from));
        self.helm_install(
            "slurm-exporter",
            "slurm-exporter/charts/slurm-exporter",
            SLURM_NS,
            &exporter,
        )?;

        step(
            "the bridge (its token from a Token resource the operator fills), and the nodes it offers to Slurm",
        );
        let _ = self.kubectl(&["create", "namespace", WORK_NS]);
        // Slurm gets all nodes but the first, which keeps the pods that do not tolerate the
        // bridge's taint on Slurm's nodes (the operator's, for one).
        for node in self
            .kubectl(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])?
            .split_whitespace()
            .skip(1)
        {
            self.kubectl(&[
                "label",
                "node",
                node,
                &format!("{EXTERNAL_NODE}=true"),
                "--overwrite",
            ])?;
        }
        let mut bridge = self.values("bridge.yaml");
        bridge.extend([
            "--set".into(),
            format!("config.managedNamespaces={{{WORK_NS}}}"),
            "--set".into(),
            "metrics.serviceMonitor.enabled=true".into(),
            "--wait".into(),
        ]);
        self.helm_install(
            "slurm-bridge",
            "slurm-bridge/charts/slurm-bridge",
            SLURM_NS,
            &bridge,
        )?;

        step("a pod in the bridge's namespace, scheduled by Slurm");
        let _ = self.kubectl(&["delete", "pod", "hello", "-n", WORK_NS, "--wait=true"]);
        self.apply(WORK_NS, HELLO_POD)?;
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let phase = self.kubectl(&[
                "get",
                "pod",
                "hello",
                "-n",
                WORK_NS,
                "-o",
                "jsonpath={.status.phase}",
            ])?;
            if phase == "Running" {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "pod {WORK_NS}/hello is still {phase:?} after 3 minutes:\n{}",
                    self.kubectl(&["get", "pod", "hello", "-n", WORK_NS, "-o", "yaml"])?
                );
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let job = self.kubectl(&[
            "get",
            "pod",
            "hello",
            "-n",
            WORK_NS,
            "-o",
            "jsonpath={.metadata.labels.scheduler\\.slinky\\.slurm\\.net/slurm-jobid} on {.spec.nodeName}",
        ])?;
        step(
            "Prometheus, scraping what the ServiceMonitors select, with the exporter's alert rules",
        );
        super::prometheus::start(&self.state, &self.workspace)?;
        let prometheus = super::prometheus::HOST_ADDR;
        println!(
            "\nThe whole system runs on the test ground; pod {WORK_NS}/hello was placed by Slurm: job {job}.\n\
             Look at it:\n  \
             http://{prometheus}/targets                                             # Prometheus: every component's metrics, slurmctld's too; /alerts: the rules\n  \
             cargo xtask kube kubectl -- get pods -A -o wide\n  \
             cargo xtask kube kubectl -- get controllers,nodesets,restapis -n {SLURM_NS}     # the cluster as custom resources\n  \
             cargo xtask kube kubectl -- describe pod hello -n {WORK_NS}                      # the SlurmJob condition\n  \
             cargo xtask kube exec -- curl -s http://slurm-exporter.{SLURM_NS}:9341/metrics  # the exporter, through its Service\n  \
             cargo xtask helm list -n {SLURM_NS}\n\
             Pods you create in namespace {WORK_NS} are scheduled by Slurm (partition slurm-bridge).\n\
             Uninstall: cargo xtask demo --down; stop the ground: cargo xtask kube down"
        );
        Ok(())
    }

    fn down(&self) -> Result<()> {
        if super::prometheus::stop()? {
            step("Prometheus stopped");
        }
        let _ = self.kubectl(&[
            "delete",
            "namespace",
            WORK_NS,
            "--wait=true",
            "--timeout=120s",
        ]);
        for (release, ns) in [
            ("slurm-bridge", SLURM_NS),
            ("slurm-exporter", SLURM_NS),
            ("slurm", SLURM_NS),
            ("slurm-operator", OPERATOR_NS),
            ("slurm-operator-crds", "default"),
        ] {
            step(&format!("helm uninstall {release}"));
            self.helm(&[
                "uninstall",
                release,
                "-n",
                ns,
                "--wait",
                "--ignore-not-found",
            ])?;
        }
        for node in self
            .kubectl(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])?
            .split_whitespace()
        {
            let _ = self.kubectl(&["label", "node", node, &format!("{EXTERNAL_NODE}-")]);
            // The bridge is gone before it could lift its taint.
            let _ = self.kubectl(&["taint", "node", node, &format!("{MANAGED_NODE}-")]);
        }
        for ns in [SLURM_NS, OPERATOR_NS] {
            let _ = self.kubectl(&["delete", "namespace", ns, "--wait=false"]);
        }
        let _ = self.kubectl(&[
            "delete",
            "crd",
            "servicemonitors.monitoring.coreos.com",
            "--ignore-not-found",
        ]);
        println!("uninstalled; the ground keeps running (cargo xtask kube down stops it)");
        Ok(())
    }

    fn values(&self, file: &str) -> Vec<String> {
        vec![
            "-f".into(),
            self.workspace
                .join("xtask/deploy")
                .join(file)
                .display()
                .to_string(),
        ]
    }

    fn helm_install(
        &self,
        release: &str,
        chart: &str,
        ns: &str,
        extra: &[impl AsRef<str>],
    ) -> Result<()> {
        let chart = self.workspace.join(chart).display().to_string();
        let mut args = vec![
            "upgrade",
            "--install",
            release,
            &chart,
            "-n",
            ns,
            "--create-namespace",
            "--timeout",
            "300",
        ];
        args.extend(extra.iter().map(AsRef::as_ref));
        self.helm(&args)
    }

    fn helm(&self, args: &[&str]) -> Result<()> {
        let python = crate::helm::ensure()?;
        let ok = Command::new(python)
            .arg(self.workspace.join("xtask/helm/helm.py"))
            .args(args)
            .env("KUBECONFIG", crate::kube::state::kubeconfig())
            .status()?
            .success();
        if !ok {
            bail!("helm {} failed", args.join(" "));
        }
        Ok(())
    }

    fn kubectl(&self, args: &[&str]) -> Result<String> {
        ground::kubectl_output(&self.state, args)
    }

    fn apply(&self, ns: &str, yaml: &str) -> Result<()> {
        let mut child = ground::kubectl(&self.state)
            .args(["apply", "-n", ns, "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()?;
        std::io::Write::write_all(&mut child.stdin.take().expect("piped"), yaml.as_bytes())?;
        if !child.wait()?.success() {
            bail!("kubectl apply -n {ns} failed");
        }
        Ok(())
    }

    fn wait_ready(&self, ns: &str, selector: &str, want: usize, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let ready = self.kubectl(&[
                "get",
                "pods",
                "-n",
                ns,
                "-l",
                selector,
                "-o",
                r#"jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
            ])?;
            if ready.lines().filter(|l| *l == "True").count() >= want {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{ns}: fewer than {want} pods {selector} Ready after {limit:?}:\n{}",
                    self.kubectl(&["get", "pods", "-n", ns, "-o", "wide"])?
                );
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

const HELLO_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: hello
  annotations:
    slurmjob.slinky.slurm.net/job-name: hello-from-kubernetes
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: hello
      image: busybox:latest
      command: ["sh", "-c", "echo scheduled by Slurm; sleep 3600"]
      resources:
        requests:
          cpu: "1"
          memory: 64Mi
"#;
