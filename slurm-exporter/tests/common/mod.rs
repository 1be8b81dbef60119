//! Shared pieces of the exporter's integration tests: the real clusters, the exporter
//! binary, scrapes checked by a real text-format parser, and a TCP proxy.
//!
//! Clusters come from `test-support`, first match wins: `SLURM_TEST_ENV_FILES`
//! (colon-separated env files, what `cargo xtask test` sets), `SLURM_TEST_ENV` (one file),
//! `SLURM_REST_URL` with `SLURM_JWT`, every `/run/slurm-dev/*/cluster.env` (`cargo xtask
//! slurm up`). With none the tests fail.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slurm_client::{Client, ClientBuilder, StaticToken};

/// One cluster's settings (`source`, `var`, `opt`, `has_accounting`, … of
/// [`test_support::Cluster`]) and what the exporter's tests need of them.
#[derive(Debug, Clone)]
pub struct Cluster(test_support::Cluster);

impl Deref for Cluster {
    type Target = test_support::Cluster;

    fn deref(&self) -> &test_support::Cluster {
        &self.0
    }
}

impl Cluster {
    /// `24.11`, `26.05`, … (`?` when unknown), for labels and messages.
    pub fn release(&self) -> &str {
        self.0.release().unwrap_or("?")
    }

    /// The cluster's variables the exporter understands (URL, token, user).
    pub fn exporter_env(&self) -> Vec<(String, String)> {
        ["SLURM_REST_URL", "SLURM_JWT", "SLURM_USER_NAME"]
            .iter()
            .filter_map(|k| self.opt(k).map(|v| (k.to_string(), v.to_string())))
            .collect()
    }

    /// A client with the root token, for setting up and checking.
    pub fn client(&self) -> Client {
        ClientBuilder::new(self.url())
            .token(StaticToken::new(self.jwt().to_string()))
            .user_name(self.user())
            .build()
            .expect("client for the test cluster")
    }

    /// The TCP port slurmrestd is reachable on.
    pub fn rest_addr(&self) -> SocketAddr {
        let url = self.url();
        let hostport = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        hostport
            .parse()
            .unwrap_or_else(|_| panic!("SLURM_REST_URL {url} is not http://IP:PORT"))
    }
}

/// Every cluster to test against; panics with instructions when there is none.
pub fn clusters() -> Vec<Cluster> {
    test_support::clusters().into_iter().map(Cluster).collect()
}

/// A running exporter process; killed on drop.
pub struct Exporter {
    child: Child,
    pub addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
    http: reqwest::Client,
    scheme: &'static str,
}

impl Exporter {
    /// Starts the exporter with only these variables (plus PATH) and arguments, JSON logs,
    /// listening on a free loopback port.
    pub fn start(env: &[(String, String)], args: &[&str]) -> Exporter {
        Exporter::start_with(env, args, None)
    }

    /// Like [`Exporter::start`]; `tls_ca` makes scrapes use https and trust this CA.
    pub fn start_with(env: &[(String, String)], args: &[&str], tls_ca: Option<&Path>) -> Exporter {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_slurm-exporter"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start the exporter binary");
        let stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Some(addr) = listen_addr(&line) {
                        let _ = tx.send(addr);
                    }
                    logs.lock().unwrap().push(line);
                }
            });
        }
        let addr = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "the exporter did not start; its log:\n{}",
                    logs.lock().unwrap().join("\n")
                );
            }
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut http = reqwest::Client::builder().timeout(Duration::from_secs(10));
        if let Some(ca) = tls_ca {
            let pem = std::fs::read(ca).unwrap();
            http = http.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
        }
        Exporter {
            child,
            addr,
            logs,
            http: http.build().unwrap(),
            scheme: if tls_ca.is_some() { "https" } else { "http" },
        }
    }

    pub fn url(&self, path: &str) -> String {
        let host = if self.scheme == "https" {
            format!("localhost:{}", self.addr.port())
        } else {
            self.addr.to_string()
        };
        format!("{}://{host}{path}", self.scheme)
    }

    /// GETs a path; returns status, content type and body.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
        let mut req = self.http.get(self.url(path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.expect("request to the exporter");
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (status, ct, resp.text().await.unwrap())
    }

    /// GETs a path; returns status, headers and the body as sent (not decompressed).
    pub async fn get_raw(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
        let mut req = self.http.get(self.url(path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.expect("request to the exporter");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        (status, headers, resp.bytes().await.unwrap().to_vec())
    }

    /// Scrapes `/metrics` in the Prometheus text format and checks it.
    pub async fn scrape(&self) -> Metrics {
        let (status, ct, body) = self.get("/metrics", &[]).await;
        assert_eq!(status, 200, "{body}");
        assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
        Metrics::parse_prometheus(&body)
    }

    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.get("/readyz", &[]).await.0 == 200 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the exporter never got ready; its log:\n{}",
                self.logs().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Scrapes until `check` passes (returns the passing scrape) or `limit` runs out.
    pub async fn scrape_until(
        &self,
        limit: Duration,
        what: &str,
        check: impl Fn(&Metrics) -> bool,
    ) -> Metrics {
        let deadline = Instant::now() + limit;
        loop {
            let m = self.scrape().await;
            if check(&m) {
                return m;
            }
            if Instant::now() > deadline {
                panic!(
                    "{what}: not seen within {limit:?}; last scrape:\n{}",
                    m.text
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The log lines so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn listen_addr(line: &str) -> Option<SocketAddr> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("message")?.as_str()? != "slurm-exporter starting" {
        return None;
    }
    v.get("listen")?.as_str()?.parse().ok()
}

/// One sample: metric name as written, labels, value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed, checked scrape.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub text: String,
    pub samples: Vec<Sample>,
    /// Family name → type, as in `# TYPE` lines.
    pub types: BTreeMap<String, String>,
}

impl Metrics {
    /// Parses Prometheus text with a real parser (`openmetrics-parser`) and checks the
    /// conventions: HELP and TYPE on every family, counters and only counters end in
    /// `_total`, info metrics are 1, no series twice.
    pub fn parse_prometheus(text: &str) -> Metrics {
        let parsed = openmetrics_parser::prometheus::parse_prometheus(text)
            .unwrap_or_else(|e| panic!("not valid Prometheus text: {e:?}\n{text}"));
        let mut samples = Vec::new();
        let mut types = BTreeMap::new();
        for (name, family) in &parsed.families {
            types.insert(name.clone(), family.family_type.to_string());
            assert!(!family.help.is_empty(), "{name} has no HELP");
            for s in family.iter_samples() {
                let value = match &s.value {
                    openmetrics_parser::PrometheusValue::Gauge(v)
                    | openmetrics_parser::PrometheusValue::Unknown(v) => v.as_f64(),
                    openmetrics_parser::PrometheusValue::Counter(c) => c.value.as_f64(),
                    other => panic!("{name}: unexpected value {other:?}"),
                };
                samples.push(Sample {
                    name: name.clone(),
                    labels: s
                        .get_labelset()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    value,
                });
            }
        }
        let m = Metrics {
            text: text.to_string(),
            samples,
            types,
        };
        m.check_conventions();
        m.check_no_duplicate_lines();
        m
    }

    fn check_conventions(&self) {
        for (name, kind) in &self.types {
            match kind.as_str() {
                "counter" => assert!(name.ends_with("_total"), "counter {name} lacks _total"),
                "gauge" => assert!(!name.ends_with("_total"), "gauge {name} ends in _total"),
                other => panic!("{name}: unexpected type {other}"),
            }
            assert!(name.starts_with("slurm_"), "{name} lacks the slurm_ prefix");
            for bad in ["_microseconds", "_megabytes", "_mb", "_us", "_minutes"] {
                assert!(!name.ends_with(bad), "{name}: not a base unit");
            }
        }
        for s in &self.samples {
            assert!(self.types.contains_key(&s.name), "{} has no TYPE", s.name);
            if s.name.ends_with("_info") {
                assert_eq!(s.value, 1.0, "{} {:?}", s.name, s.labels);
            }
        }
    }

    /// No two sample lines name the same series (checked on the text itself, apart from
    /// the parser).
    fn check_no_duplicate_lines(&self) {
        let mut seen = HashSet::new();
        for line in self
            .text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let series = line.rsplit_once(' ').map_or(line, |(s, _)| s);
            assert!(seen.insert(series.to_string()), "series twice: {series}");
        }
    }

    /// Samples of `name` whose labels include all of `labels`.
    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The one value of `name` with these labels, if present.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found = self.find(name, labels);
        assert!(
            found.len() <= 1,
            "{name} {labels:?} matches {} series",
            found.len()
        );
        found.first().map(|s| s.value)
    }

    /// The sum of `name` over series with these labels (0 when none).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.find(name, labels).iter().map(|s| s.value).sum()
    }

    /// Every name a query may use: sample names and the names in HELP lines (families
    /// with no series yet).
    pub fn names(&self) -> HashSet<String> {
        let mut names: HashSet<String> = self.samples.iter().map(|s| s.name.clone()).collect();
        names.extend(self.types.keys().cloned());
        names
    }
}

/// Parses OpenMetrics text with a real parser; returns the family names and types.
pub fn parse_openmetrics(text: &str) -> BTreeMap<String, String> {
    assert!(
        text.ends_with("# EOF\n"),
        "OpenMetrics text must end with # EOF"
    );
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("not valid OpenMetrics: {e:?}\n{text}"));
    parsed
        .families
        .iter()
        .map(|(name, f)| (name.clone(), f.family_type.to_string()))
        .collect()
}

/// A loopback TCP proxy to slurmrestd that can be stopped (every connection cut) and
/// started again on the same port, to make slurmrestd "go away" without touching the
/// shared cluster.
pub struct Proxy {
    pub addr: SocketAddr,
    target: SocketAddr,
    tasks: Option<tokio::task::JoinSet<()>>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut p = Proxy {
            addr,
            target,
            tasks: None,
        };
        p.serve(listener);
        p
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let target = self.target;
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                conns.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        self.tasks = Some(tasks);
    }

    /// Closes the listener and cuts every connection.
    pub async fn stop(&mut self) {
        if let Some(mut tasks) = self.tasks.take() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
    }

    /// Listens again on the same port.
    pub async fn restart(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("cannot listen on {} again: {e}", self.addr),
            }
        };
        self.serve(listener);
    }
}

/// Unix time now, in seconds.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}
