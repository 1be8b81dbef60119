//! A real Prometheus (Debian's `prometheus` package) inside the test ground's network namespace,
//! where it reaches pod IPs as a Prometheus in a pod would: it scrapes what the ServiceMonitors
//! the charts render select ([`scrape`]) and loads rule files. Tests
//! query it over its HTTP API through a host port ([`forward_into_ground`]).

pub mod scrape;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ground::{Ground, InsideProcess, forward_into_ground};
use crate::http::get;

/// How often rules are evaluated and targets scraped when a monitor names no interval.
const INTERVAL: &str = "5s";

/// A Prometheus inside the ground; stopped, and its data removed, on drop.
pub struct Prometheus<'g> {
    g: &'g Ground,
    process: InsideProcess,
    api: SocketAddr,
    dir: PathBuf,
    jobs: Vec<scrape::ScrapeJob>,
}

impl<'g> Prometheus<'g> {
    /// Starts Prometheus scraping what the ServiceMonitors among `monitors` (rendered chart
    /// objects) select, with the rules `rules` (rule files' contents, written into its own
    /// directory, removed with it), and waits until it answers. The targets are
    /// discovered now and on [`Prometheus::discover`].
    pub fn start(g: &'g Ground, monitors: &[Value], rules: &[&str]) -> Prometheus<'g> {
        let jobs = scrape::jobs(monitors).unwrap_or_else(|e| panic!("the ServiceMonitors: {e}"));
        let dir = std::env::temp_dir().join(format!("ground-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let configs: Vec<Value> = jobs
            .iter()
            .enumerate()
            .map(|(i, j)| j.config(&dir.join(format!("targets-{i}.json"))))
            .collect();
        let rules: Vec<PathBuf> = rules
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let path = dir.join(format!("rules-{i}.yaml"));
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        // JSON is YAML: Prometheus reads it as its configuration.
        let config = json!({
            "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
            "rule_files": rules,
            "scrape_configs": configs,
        });
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        let check = Command::new("promtool")
            .arg("check")
            .arg("config")
            .arg(&config_path)
            .output()
            .expect("promtool (Debian's prometheus package)");
        assert!(
            check.status.success(),
            "promtool check config {}:\n{}{}",
            config_path.display(),
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        // A port of its own in the ground's shared namespace, from the test's pid.
        let port = 20_000 + std::process::id() % 10_000;
        let listen = format!("127.0.0.1:{port}");
        let process = g.spawn_inside(
            "prometheus",
            &[
                &format!("--config.file={}", config_path.display()),
                &format!("--storage.tsdb.path={}", dir.join("data").display()),
                &format!("--web.listen-address={listen}"),
                "--storage.tsdb.retention.time=2h",
            ],
            &[],
        );
        let api = forward_into_ground(listen.parse().unwrap());
        let p = Prometheus {
            g,
            process,
            api,
            dir,
            jobs,
        };
        p.discover();
        p.wait("Prometheus to answer", 60, || {
            get(p.api, "/-/ready").is_ok_and(|(status, _)| status == 200)
        });
        p
    }

    /// The scrape jobs' names.
    pub fn jobs(&self) -> Vec<String> {
        self.jobs.iter().map(|j| j.name.clone()).collect()
    }

    /// Discovers the targets again (Prometheus reads its target files when they change).
    pub fn discover(&self) {
        let mut namespaces: Vec<&String> = self.jobs.iter().flat_map(|j| &j.namespaces).collect();
        namespaces.sort();
        namespaces.dedup();
        let mut objects = Vec::new();
        for ns in namespaces {
            let list = self.g.ok(&[
                "get",
                "services,endpointslices,pods",
                "-n",
                ns,
                "-o",
                "json",
            ]);
            let list: Value = serde_json::from_str(&list).expect("kubectl -o json");
            objects.extend(list["items"].as_array().cloned().unwrap_or_default());
        }
        for (i, job) in self.jobs.iter().enumerate() {
            let path = self.dir.join(format!("targets-{i}.json"));
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, job.targets(&objects).to_string()).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
    }

    /// The result of the instant query `expr` (`data.result`), or Prometheus' error.
    pub fn query(&self, expr: &str) -> Result<Value, String> {
        self.api_get(&format!("/api/v1/query?query={}", encode(expr)))
            .map(|data| data["result"].clone())
    }

    /// The values of `label` on the series that match `selector` (Grafana's `label_values`).
    pub fn label_values(&self, label: &str, selector: &str) -> Result<Vec<String>, String> {
        let data = self.api_get(&format!(
            "/api/v1/label/{label}/values?match[]={}",
            encode(selector)
        ))?;
        Ok(data
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The active targets (`data.activeTargets` of `/api/v1/targets`).
    pub fn targets(&self) -> Vec<Value> {
        self.api_get("/api/v1/targets")
            .map(|d| d["activeTargets"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// The alerts pending or firing (`data.alerts` of `/api/v1/alerts`).
    pub fn alerts(&self) -> Vec<Value> {
        self.api_get("/api/v1/alerts")
            .map(|d| d["alerts"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Waits until every scrape job in `jobs` has a target and all targets are up; the targets.
    pub fn wait_targets_up(&self, jobs: &[String], secs: u64) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let last = self.targets();
            let all_up = !last.is_empty() && last.iter().all(|t| t["health"] == "up");
            let every_job = jobs
                .iter()
                .all(|j| last.iter().any(|t| t["scrapePool"] == j.as_str()));
            if all_up && every_job {
                return last;
            }
            if Instant::now() > deadline {
                panic!(
                    "Prometheus: not every target of {jobs:?} up after {secs} s:\n{}\nits log:\n{}",
                    serde_json::to_string_pretty(&last).unwrap(),
                    self.process.log()
                );
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// Polls `done` every second for `secs`; panics with `what` and Prometheus' log after.
    pub fn wait(&self, what: &str, secs: u64, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !done() {
            if Instant::now() > deadline {
                panic!(
                    "waited {secs} s for {what}; alerts:\n{}\nPrometheus' log:\n{}",
                    serde_json::to_string_pretty(&self.alerts()).unwrap(),
                    self.process.log()
                );
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// GET `path` of the API: its `data`, or the error Prometheus answered.
    fn api_get(&self, path: &str) -> Result<Value, String> {
        let (status, body) = get(self.api, path).map_err(|e| format!("GET {path}: {e}"))?;
        let v: Value = serde_json::from_str(&body)
            .map_err(|e| format!("GET {path}: HTTP {status}, not JSON ({e}): {body}"))?;
        if v["status"] != "success" {
            return Err(format!(
                "GET {path}: HTTP {status}: {}: {}",
                v["errorType"], v["error"]
            ));
        }
        Ok(v["data"].clone())
    }
}

impl Drop for Prometheus<'_> {
    fn drop(&mut self) {
        self.process.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Percent-encoding of a query parameter.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
