//! What the operator's benchmarks measure and how: the operator's process (pid, RSS), its
//! requests in the ground's audit log (told apart by its `User-Agent`), the cluster's slurmrestd,
//! and percentiles.

#![allow(dead_code)] // each benchmark uses a part

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Api;
use slurm_client::{Client, StaticToken};

use crate::common::TestEnv;

pub type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// A benchmark's `main`: skipped without the ground; otherwise `run(env file, quick)` on a tokio
/// runtime (`SLURM_BENCH_QUICK=1`: quick), a failure ending the process with 1, then the wall time.
pub fn bench_main<F, Fut>(what: &str, run: F)
where
    F: FnOnce(String, bool) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    if let Some(why) = test_support::ground::not_up() {
        println!("skipped: {why}");
        return;
    }
    let env_file = test_support::ground::env_file();
    let quick = std::env::var("SLURM_BENCH_QUICK").is_ok_and(|v| v == "1");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = std::time::Instant::now();
    if let Err(err) = runtime.block_on(run(env_file, quick)) {
        eprintln!("{what} failed: {err}");
        std::process::exit(1);
    }
    println!("\n(wall time {:.0} s)", started.elapsed().as_secs_f64());
}

/// Sets NodeSet `name`'s replicas through its scale subresource.
pub async fn scale(
    nodesets: &Api<slurm_operator::crd::NodeSet>,
    name: &str,
    replicas: usize,
) -> Result<()> {
    let patch = kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}}));
    nodesets
        .patch_scale(name, &kube::api::PatchParams::default(), &patch)
        .await?;
    Ok(())
}

/// The operator's `User-Agent` prefix (see `kube_support::client`).
pub const AGENT: &str = "slurm-operator/";

/// A client through the RestApi Service with the Token's JWT, once both exist.
pub async fn slurm(kube: &kube::Client, ns: &str) -> Result<Option<Client>> {
    let services: Api<Service> = Api::namespaced(kube.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), ns);
    let Some(ip) = services
        .get_opt("slurm-restapi")
        .await?
        .and_then(|s| s.spec?.cluster_ip)
    else {
        return Ok(None);
    };
    let Some(jwt) = secrets
        .get_opt("slurm-token-jwt-slurm")
        .await?
        .and_then(|s| s.data?.remove("SLURM_JWT"))
    else {
        return Ok(None);
    };
    let port = test_support::ground::forward_into_ground(format!("{ip}:6820").parse()?);
    let jwt = String::from_utf8(jwt.0)?;
    Ok(Some(
        Client::builder(format!("http://{port}"))
            .token(StaticToken::new(jwt))
            .build()?,
    ))
}

pub fn ground_var(env_file: &str, key: &str) -> Option<String> {
    std::fs::read_to_string(env_file)
        .ok()?
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_owned())
}

/// The `slurm-operator` process in the operator's process group: the handle's pid is that of the
/// `ip netns exec` / `sh` wrapper, which may or may not have exec'd the operator yet.
pub fn operator_pid(env: &mut TestEnv) -> Option<u32> {
    let group = env.operator().pid()?;
    processes()
        .into_iter()
        .find(|p| p.pgid == group && p.comm == "slurm-operator")
        .map(|p| p.pid)
}

/// Other `slurm-operator` processes on the machine (other people's tests).
pub fn other_operators(ours: u32) -> usize {
    processes()
        .iter()
        .filter(|p| p.comm == "slurm-operator" && p.pid != ours)
        .count()
}

pub struct Proc {
    pub pid: u32,
    pub pgid: u32,
    pub comm: String,
}

pub fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_owned();
        let mut fields = rest.split_whitespace();
        let _state = fields.next()?;
        let _ppid = fields.next()?;
        let pgid = fields.next()?.parse().ok()?;
        Some(Proc { pid, pgid, comm })
    })
    .collect()
}

/// The process's peak RSS (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Where the audit log stood: its inode and length.
pub struct AuditMark {
    path: PathBuf,
    inode: u64,
    offset: u64,
}

impl AuditMark {
    pub fn now(path: &Path) -> Result<AuditMark> {
        let meta = std::fs::metadata(path)?;
        Ok(AuditMark {
            path: path.to_owned(),
            inode: meta.ino(),
            offset: meta.len(),
        })
    }

    /// The entries written since, also across a rotation (the old file renamed beside it).
    pub fn read_since(&self) -> Result<Vec<serde_json::Value>> {
        let mut files = Vec::new();
        if std::fs::metadata(&self.path)?.ino() == self.inode {
            files.push((self.path.clone(), self.offset));
        } else {
            let dir = self.path.parent().ok_or("audit log without a directory")?;
            for entry in std::fs::read_dir(dir)? {
                let p = entry?.path();
                if std::fs::metadata(&p).is_ok_and(|m| m.ino() == self.inode) {
                    files.push((p, self.offset));
                }
            }
            files.push((self.path.clone(), 0));
        }
        let mut out = Vec::new();
        for (path, offset) in files {
            let mut file = std::fs::File::open(&path)?;
            file.seek(SeekFrom::Start(offset))?;
            for line in BufReader::new(file).lines() {
                if let Ok(v) = serde_json::from_str(&line?) {
                    out.push(v);
                }
            }
        }
        Ok(out)
    }
}

#[derive(Default)]
pub struct Count {
    pub ns_reads: usize,
    pub ns_writes: usize,
    pub cluster_reads: usize,
    pub cluster_writes: usize,
    /// (verb, resource, count) in the namespace.
    pub ns_detail: Vec<(String, String, usize)>,
    /// (verb, resource, count) of the cluster-scoped ones.
    pub cluster_detail: Vec<(String, String, usize)>,
}

/// The operator's requests (one per audit ID, told apart by its [`AGENT`]): those in `ns`, and
/// the cluster-scoped ones (of every operator on the machine: they cannot be told apart).
pub fn count_requests(entries: &[serde_json::Value], ns: &str) -> Count {
    let mut seen = HashSet::new();
    let mut count = Count::default();
    let mut detail = std::collections::BTreeMap::new();
    let mut cluster_detail = std::collections::BTreeMap::new();
    for e in entries {
        let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_owned();
        if !seen.insert(s(&e["auditID"])) {
            continue;
        }
        if !s(&e["userAgent"]).starts_with(AGENT) {
            continue;
        }
        let verb = s(&e["verb"]);
        let read = matches!(verb.as_str(), "get" | "list" | "watch");
        let namespace = s(&e["objectRef"]["namespace"]);
        if namespace == ns {
            if read {
                count.ns_reads += 1;
            } else {
                count.ns_writes += 1;
            }
            let mut resource = s(&e["objectRef"]["resource"]);
            let sub = s(&e["objectRef"]["subresource"]);
            if !sub.is_empty() {
                resource = format!("{resource}/{sub}");
            }
            *detail.entry((verb, resource)).or_insert(0) += 1;
        } else if namespace.is_empty() {
            if read {
                count.cluster_reads += 1;
            } else {
                count.cluster_writes += 1;
            }
            *cluster_detail
                .entry((verb, s(&e["objectRef"]["resource"])))
                .or_insert(0) += 1;
        }
    }
    count.ns_detail = detail.into_iter().map(|((v, r), n)| (v, r, n)).collect();
    count.cluster_detail = cluster_detail
        .into_iter()
        .map(|((v, r), n)| (v, r, n))
        .collect();
    count
}

pub fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
