//! The Kubernetes test ground (`cargo xtask kube up`) for tests: the ground from the env file
//! `up` writes, kubectl with its kubeconfig, a namespace per test, waits, pod logs, and processes
//! started inside the ground's network namespace as if they ran in a pod ([`inside`]).
//! Tests fail, never skip, when the ground is not up.

mod api_proxy;
mod forward;
mod inside;
mod netns;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use api_proxy::ApiProxy;
pub use forward::forward_into_ground;
pub use inside::InsideProcess;

/// `cargo xtask kube up` writes it; `KUBE_GROUND_ENV_FILE` names another.
const ENV_FILE: &str = "/run/slurm-dev/kube/kube.env";

/// The ground's env file: `KUBE_GROUND_ENV_FILE`, else where `kube up` writes it.
pub fn env_file() -> String {
    std::env::var("KUBE_GROUND_ENV_FILE").unwrap_or_else(|_| ENV_FILE.into())
}

/// Why a benchmark that needs the ground cannot run: `None` when the ground is up.
pub fn not_up() -> Option<String> {
    let file = env_file();
    (!Path::new(&file).is_file())
        .then(|| format!("the test ground is not up ({file} missing): cargo xtask kube up"))
}

pub struct Ground {
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    inside_kubeconfig: OnceLock<PathBuf>,
}

impl Ground {
    /// One ground for the whole test process, for helpers that hand out `Namespace<'static>`.
    pub fn shared() -> &'static Ground {
        static GROUND: OnceLock<Ground> = OnceLock::new();
        GROUND.get_or_init(Ground::connect)
    }

    pub fn connect() -> Ground {
        let file = env_file();
        let raw = std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!("{file}: {e}; start the test ground first: cargo xtask kube up")
        });
        let var = |key: &str| -> PathBuf {
            raw.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.into())
                .unwrap_or_else(|| panic!("{key} missing in {file}"))
        };
        Ground {
            kubeconfig: var("KUBECONFIG"),
            kubectl: var("KUBE_GROUND_KUBECTL"),
            inside_kubeconfig: OnceLock::new(),
        }
    }

    /// The ground's kubeconfig (API server on the host's loopback).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client of the ground's API server, with its admin kubeconfig.
    pub async fn kube_client(
        &self,
    ) -> Result<kube::Client, Box<dyn std::error::Error + Send + Sync>> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Debian sid's kubectl, as `kube up` found it.
    pub fn kubectl_path(&self) -> &Path {
        &self.kubectl
    }

    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(&self.kubectl)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running kubectl");
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    }

    /// kubectl that must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args, None);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn apply(&self, ns: &str, yaml: &str) {
        let out = self.kubectl(&["apply", "-n", ns, "-f", "-"], Some(yaml));
        assert!(
            out.status.success(),
            "kubectl apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A fresh namespace for one test, deleted again when the guard drops.
    pub fn namespace(&self, prefix: &str) -> Namespace<'_> {
        let name = format!("{prefix}-{}", std::process::id());
        let _ = self.kubectl(&["delete", "namespace", &name, "--wait=true"], None);
        self.ok(&["create", "namespace", &name]);
        Namespace { ground: self, name }
    }

    /// A jsonpath of an object, "" while it does not exist.
    pub fn get(&self, ns: &str, what: &str, jsonpath: &str) -> String {
        let out = self.kubectl(
            &["get", "-n", ns, what, "-o", &format!("jsonpath={jsonpath}")],
            None,
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `check` holds for the jsonpath's value; panics with the last value after `limit`.
    pub fn wait_for(
        &self,
        ns: &str,
        what: &str,
        jsonpath: &str,
        limit: Duration,
        check: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.get(ns, what, jsonpath);
            if check(&v) {
                return v;
            }
            if Instant::now() > deadline {
                let describe = self.kubectl(&["get", "-n", ns, what, "-o", "yaml"], None);
                panic!(
                    "{ns}/{what} {jsonpath}: still {v:?} after {limit:?}\n{}",
                    String::from_utf8_lossy(&describe.stdout)
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// The log of a pod's container, from the kubelet's files (CRI format, message only).
    pub fn log(&self, ns: &str, pod: &str, container: &str) -> String {
        let uid = self.get(ns, &format!("pod/{pod}"), "{.metadata.uid}");
        let path = format!("/var/lib/slurm-dev/kube/logs/pods/{ns}_{pod}_{uid}/{container}/0.log");
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.splitn(4, ' ').nth(3))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The last `lines` lines of every container log of the pods in `ns`, past and present, each
    /// under a heading: what a failing test shows of the components it ran.
    pub fn logs_tail(&self, ns: &str, lines: usize) -> String {
        let root = std::path::Path::new("/var/lib/slurm-dev/kube/logs/pods");
        let mut out = String::new();
        let mut pods: Vec<_> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{ns}_")))
            })
            .collect();
        pods.sort();
        for pod in pods {
            for container in std::fs::read_dir(&pod).into_iter().flatten().flatten() {
                let text =
                    std::fs::read_to_string(container.path().join("0.log")).unwrap_or_default();
                let all: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.splitn(4, ' ').nth(3))
                    .collect();
                let name = pod.file_name().unwrap_or_default().to_string_lossy();
                out.push_str(&format!(
                    "--- {name}/{}\n",
                    container.file_name().to_string_lossy()
                ));
                for line in &all[all.len().saturating_sub(lines)..] {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }
}

pub struct Namespace<'a> {
    ground: &'a Ground,
    pub name: String,
}

impl Drop for Namespace<'_> {
    fn drop(&mut self) {
        let _ = self
            .ground
            .kubectl(&["delete", "namespace", &self.name, "--wait=false"], None);
    }
}
