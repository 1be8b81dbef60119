//! Monitoring as users run it, on the end-to-end's installed releases: a real Prometheus scrapes
//! every component through the ServiceMonitors their charts render (the same values, the monitors
//! turned on), each /metrics passes `promtool check metrics`, every query of the shipped dashboard
//! answers with data where this scenario has some, and the shipped alert rules fire on an outage
//! of slurmrestd and resolve after it.

use std::process::{Command, Stdio};

use serde_json::Value;
use test_support::ground::{Ground, forward_into_ground};
use test_support::helm::{template, workspace};
use test_support::prometheus::Prometheus;

use super::{Cluster, Names, bridge_set, http_get, json, values};

/// How often the monitors scrape here (the charts' default is 30 s).
const SCRAPE: &str = "5s";

/// The `slurm` chart's values that turn slurmctld's metrics on, with the ServiceMonitor the
/// operator makes for them.
pub const SLURMCTLD_METRICS: &[&str] = &[
    "--set",
    "controller.metrics.enabled=true",
    "--set",
    "controller.metrics.serviceMonitor.enabled=true",
    "--set",
    "controller.metrics.serviceMonitor.interval=5s",
];

/// The port slurmctld's ServiceMonitor scrapes (the `endpoint` label of its targets).
const SLURMCTLD_PORT: &str = "slurmctld";

/// Metric families this scenario has no series of, and why; a dashboard query of only these may
/// answer nothing. Any other query must answer with data.
const ABSENT: &[(&str, &str)] = &[
    ("slurm_node_gpus", "no node has GPUs"),
    ("slurm_node_gpus_allocated", "no node has GPUs"),
    ("slurm_partition_gpus", "no node has GPUs"),
    ("slurm_jobs_gpus", "no job asks for GPUs"),
    ("slurm_reservation_", "no reservation"),
    ("slurm_license_", "no license"),
    (
        "slurm_backfill_het_jobs_backfilled_total",
        "no heterogeneous job",
    ),
    ("slurm_jobs_failed_total", "no job fails"),
    (
        "slurm_backfill_last_cycle_timestamp_seconds",
        "no backfill cycle without pending jobs",
    ),
    (
        "slurm_partition_max_time_seconds",
        "partitions without limits",
    ),
    (
        "slurm_partition_default_time_seconds",
        "partitions without limits",
    ),
    (
        "slurm_partition_max_nodes_per_job",
        "partitions without limits",
    ),
    (
        "slurm_share_",
        "no accounting (slurmdbd) in the chart's cluster here",
    ),
    ("slurm_qos_", "no accounting"),
    ("slurm_association_", "no accounting"),
    ("slurm_accounting_up", "no accounting: its sources are off"),
];

/// Prometheus over the releases of `n`: started, every target up, each /metrics linted.
pub fn prometheus<'g>(g: &'g Ground, n: &Names) -> Prometheus<'g> {
    let monitors = |chart: &str, release: &str, ns: &str, extra: Vec<String>| -> Vec<Value> {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let text = template(chart, release, ns, &extra).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("helm template --json: {e}"))
    };
    let on = |prefix: &str| {
        vec![
            "--set".to_owned(),
            format!("{prefix}.enabled=true"),
            "--set".to_owned(),
            format!("{prefix}.interval={SCRAPE}"),
        ]
    };
    let mut objects = monitors(
        "slurm-operator/charts/slurm-operator",
        "slurm-operator",
        &n.operator,
        on("operator.serviceMonitor"),
    );
    objects.extend(monitors(
        "slurm-exporter/charts/slurm-exporter",
        "slurm-exporter",
        &n.slurm,
        [values("exporter.yaml"), on("serviceMonitor")].concat(),
    ));
    objects.extend(monitors(
        "slurm-bridge/charts/slurm-bridge",
        "slurm-bridge",
        &n.slurm,
        [
            values("bridge.yaml"),
            bridge_set(n),
            on("metrics.serviceMonitor"),
        ]
        .concat(),
    ));
    // The one the operator made for slurmctld (Controller `slurm`, metrics on): as it is.
    g.wait_for(
        &n.slurm,
        "servicemonitors",
        "{.items[*].metadata.name}",
        std::time::Duration::from_secs(60),
        |names| names == "slurm",
    );
    let made: Value =
        serde_json::from_str(&g.ok(&["get", "servicemonitors", "-n", &n.slurm, "-o", "json"]))
            .expect("kubectl -o json");
    objects.extend(made["items"].as_array().cloned().unwrap_or_default());
    let p = Prometheus::start(g, &objects, &[&short_rules()]);
    let jobs = p.jobs();
    assert_eq!(
        jobs.len(),
        3 + 4,
        "one monitor per component, and slurmctld's four endpoints: {jobs:?}"
    );
    for target in p.wait_targets_up(&jobs, 120) {
        // slurmctld's output is Slurm's to lint, not this project's.
        if target["labels"]["endpoint"] != SLURMCTLD_PORT {
            lint(&target);
        }
    }
    p
}

/// The Controller's `metrics.serviceMonitor.enabled` turned off: the operator deletes the
/// ServiceMonitor it made; on again: it makes it again.
pub fn service_monitor_follows_the_controller(g: &Ground, n: &Names) {
    let set = |enabled: bool| {
        g.ok(&[
            "patch",
            "controller",
            "slurm",
            "-n",
            &n.slurm,
            "--type=merge",
            "-p",
            &format!(
                "{{\"spec\":{{\"metrics\":{{\"serviceMonitor\":{{\"enabled\":{enabled}}}}}}}}}"
            ),
        ])
    };
    let names = |want: &'static str| {
        g.wait_for(
            &n.slurm,
            "servicemonitors",
            "{.items[*].metadata.name}",
            std::time::Duration::from_secs(60),
            move |names| names == want,
        )
    };
    set(false);
    names("");
    set(true);
    names("slurm");
}

/// slurmctld's own counts (`/metrics/nodes`, `/metrics/jobs`) and the exporter's for the same
/// cluster agree once both have scraped a steady state: nodes, running and pending jobs.
pub fn slurmctld_agrees_with_exporter(p: &Prometheus) {
    // slurmctld's targets are those of its port; the exporter's the others (the operator and
    // the bridge export none of these families).
    let (ctld, exporter) = (
        format!("endpoint=\"{SLURMCTLD_PORT}\""),
        format!("endpoint!=\"{SLURMCTLD_PORT}\""),
    );
    let pairs = [
        (
            "nodes",
            format!("slurm_nodes{{{ctld}}}"),
            format!("slurm_nodes{{{exporter}}}"),
        ),
        (
            "running jobs",
            format!("slurm_jobs_running{{{ctld}}}"),
            format!("slurm_jobs{{{exporter},state=~\"(?i)running\"}}"),
        ),
        (
            "pending jobs",
            format!("slurm_jobs_pending{{{ctld}}}"),
            format!("slurm_jobs_pending{{{exporter}}}"),
        ),
    ];
    let value = |q: &str| -> Option<f64> {
        let r = p.query(&format!("sum({q})")).ok()?;
        r.as_array()?.first()?["value"][1].as_str()?.parse().ok()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let last = loop {
        let now: Vec<_> = pairs
            .iter()
            .map(|(what, ctld, exporter)| (*what, value(ctld), value(exporter)))
            .collect();
        if now.iter().all(|(_, c, e)| c.is_some() && c == e) {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "slurmctld's counts and the exporter's (what, slurmctld, exporter) never agreed in 90 s: {now:?}"
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
    let get = |what: &str| last.iter().find(|(w, ..)| *w == what).and_then(|l| l.1);
    // The scenario has nodes, the bridge's running job and the held one.
    assert!(get("nodes") > Some(0.0), "{last:?}");
    assert!(get("running jobs") >= Some(1.0), "{last:?}");
    assert!(get("pending jobs") >= Some(1.0), "{last:?}");
}

/// A job held pending, for the queries and counts of pending jobs (one runs already: the
/// bridge's); its id.
pub fn hold_job(cluster: &Cluster) -> u64 {
    let held = cluster.cli(&[
        "jobs",
        "submit",
        "--name",
        "held",
        "--partition",
        "workers",
        "--hold",
        "--wrap",
        "hostname",
        "--output",
        "json",
    ]);
    json(&held)["job_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no job id in {held}"))
}

/// Every query of the shipped dashboard, its variables filled as Grafana would, answers; with
/// data unless it reads only families of [`ABSENT`]. A job is held pending meanwhile
/// ([`hold_job`]).
pub fn dashboard_answers(p: &Prometheus) {
    let some = |q: &str| {
        p.query(q)
            .is_ok_and(|r| r.as_array().is_some_and(|a| !a.is_empty()))
    };
    // Rates need two scrapes within their window.
    p.wait("two scrapes of the exporter, and the held job", 90, || {
        some("count_over_time(slurm_up[1m]) >= 3")
            && some(&format!(
                "slurm_jobs_pending{{endpoint!=\"{SLURMCTLD_PORT}\"}} > 0"
            ))
    });
    let instances = p
        .label_values("instance", "slurm_up")
        .unwrap_or_else(|e| panic!("$instance: {e}"));
    assert_eq!(instances.len(), 1, "one exporter: {instances:?}");
    let fill = |expr: &str| {
        expr.replace("$instance", &instances[0].replace('.', "\\\\."))
            .replace("$partition", ".*")
            .replace("$__rate_interval", "1m")
    };
    let text = std::fs::read_to_string(
        workspace().join("slurm-exporter/charts/slurm-exporter/dashboards/slurm.json"),
    )
    .unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let mut failures = Vec::new();
    let mut queries = 0;
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        for target in panel["targets"].as_array().into_iter().flatten() {
            let Some(expr) = target["expr"].as_str() else {
                continue;
            };
            queries += 1;
            let query = fill(expr);
            match p.query(&query) {
                Err(e) => failures.push(format!("{title}: {query}: {e}")),
                Ok(r) if r.as_array().is_some_and(Vec::is_empty) && !only_absent(expr) => {
                    failures.push(format!("{title}: {query}: no series"))
                }
                Ok(_) => {}
            }
        }
    }
    assert!(queries > 100, "the dashboard's queries were not found");
    assert!(
        failures.is_empty(),
        "dashboard queries that fail or answer nothing ({} of {queries}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// slurmrestd stopped (its RestApi scaled to 0): `SlurmUnreachable` fires; started again, it
/// resolves, and the alerts left are those of before the outage.
pub fn outage_fires_and_resolves(g: &Ground, n: &Names, p: &Prometheus) {
    let scale = |replicas: u32| {
        g.ok(&[
            "patch",
            "restapi",
            "slurm",
            "-n",
            &n.slurm,
            "--type=merge",
            "-p",
            &format!("{{\"spec\":{{\"replicas\":{replicas}}}}}"),
        ])
    };
    // Every rule has been evaluated on healthy data for longer than its (shortened) `for:`.
    std::thread::sleep(std::time::Duration::from_secs(15));
    let before = active(p);
    assert!(
        !before.iter().any(|(name, _)| name == "SlurmUnreachable"),
        "SlurmUnreachable before the outage: {before:?}"
    );
    scale(0);
    p.wait("SlurmUnreachable firing", 120, || {
        firing(p).iter().any(|a| a == "SlurmUnreachable")
    });
    scale(1);
    let left = || -> Vec<(String, String)> {
        active(p)
            .into_iter()
            .filter(|a| !before.contains(a) && !WINDOWED.contains(&a.0.as_str()))
            .collect()
    };
    p.wait("the alerts of the outage resolved", 180, || {
        left().is_empty()
    });
}

/// Alerts on errors counted over the last 10 minutes: an outage keeps them for that long after
/// it ends, by design.
const WINDOWED: &[&str] = &["SlurmOperatorReconcileFailing", "SlurmTokenRejected"];

/// The alerts pending or firing: name and labels.
fn active(p: &Prometheus) -> Vec<(String, String)> {
    p.alerts()
        .iter()
        .map(|a| {
            let name = a["labels"]["alertname"].as_str().unwrap_or_default();
            (name.to_owned(), a["labels"].to_string())
        })
        .collect()
}

fn firing(p: &Prometheus) -> Vec<String> {
    p.alerts()
        .iter()
        .filter(|a| a["state"] == "firing")
        .filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_owned))
        .collect()
}

/// The shipped rules file with each `for:` shortened to 10 s, so that an outage of seconds
/// shows what an outage of minutes would.
fn short_rules() -> String {
    let text = std::fs::read_to_string(
        workspace().join("slurm-exporter/charts/slurm-exporter/rules/slurm.rules.yaml"),
    )
    .unwrap();
    text.lines()
        .map(|l| match l.trim_start().strip_prefix("for:") {
            Some(_) => format!("{}for: 10s\n", &l[..l.len() - l.trim_start().len()]),
            None => format!("{l}\n"),
        })
        .collect()
}

/// `promtool check metrics` of the target's /metrics, read as Prometheus read it.
fn lint(target: &Value) {
    let url = target["scrapeUrl"].as_str().expect("a scrape URL");
    let rest = url.strip_prefix("http://").expect("plain HTTP");
    let (addr, path) = rest.split_once('/').expect("a path");
    let local = forward_into_ground(addr.parse().expect("an IP:port"));
    let text = http_get(local, &format!("/{path}")).unwrap_or_else(|e| panic!("{url}: {e}"));
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // Problems are printed one a line, on stderr; a parse error is one of them.
    let printed = [out.stdout, out.stderr].concat();
    let printed = String::from_utf8_lossy(&printed);
    let problems: Vec<&str> = printed
        .lines()
        .filter(|l| !l.trim().is_empty() && !openmetrics_counter(&text, l))
        .collect();
    assert!(
        problems.is_empty(),
        "promtool check metrics of {} ({url}):\n{}",
        target["labels"]["job"],
        problems.join("\n")
    );
}

/// Whether promtool's `problem` is only the text format's reading of an OpenMetrics counter:
/// OpenMetrics names the family `x` in HELP and TYPE and its sample `x_total`, and promtool
/// (which parses the text format) finds no help for `x_total`.
fn openmetrics_counter(text: &str, problem: &str) -> bool {
    let Some(family) = problem
        .strip_suffix(" no help text")
        .and_then(|n| n.strip_suffix("_total"))
    else {
        return false;
    };
    text.trim_end().ends_with("# EOF")
        && text
            .lines()
            .any(|l| l == format!("# TYPE {family} counter"))
        && text
            .lines()
            .any(|l| l.starts_with(&format!("# HELP {family} ")))
}

/// Whether every metric name in `expr` is of a family in [`ABSENT`].
fn only_absent(expr: &str) -> bool {
    let names: Vec<&str> = expr
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("slurm_"))
        .collect();
    !names.is_empty()
        && names
            .iter()
            .all(|n| ABSENT.iter().any(|(family, _)| n.starts_with(family)))
}

fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}
