//! The Grafana dashboard (`charts/slurm-exporter/dashboards/slurm.json`, inside the chart so
//! that Helm ships it as a ConfigMap): a well-formed dashboard whose every query names metrics
//! the exporter really emits, with labels they really have, `rate()` only on counters, and only
//! variables that are defined.
//!
//! The emitted families come from the exporter's catalogue (`slurm_exporter::catalogue`),
//! which is built from the sources' own code; the cluster test checks it against a real
//! scrape.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use slurm_exporter::catalogue::{self, Entry};
use slurm_exporter::family::Kind;
use slurm_exporter::sources::SourceKind;

const DASHBOARD: &str = include_str!("../charts/slurm-exporter/dashboards/slurm.json");
const README: &str = include_str!("../README.md");

/// The datasource every panel and query uses: the dashboard's datasource variable.
const DATASOURCE_UID: &str = "${DS_PROMETHEUS}";

/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// Grafana's own variables.
const BUILTIN_VARIABLES: [&str; 11] = [
    "__rate_interval",
    "__interval",
    "__interval_ms",
    "__range",
    "__range_s",
    "__range_ms",
    "__from",
    "__to",
    "__dashboard",
    "__org",
    "__user",
];

fn dashboard() -> Value {
    serde_json::from_str(DASHBOARD)
        .expect("charts/slurm-exporter/dashboards/slurm.json is not valid JSON")
}

fn catalogue() -> BTreeMap<String, Entry> {
    catalogue::all()
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect()
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels is a list") {
        out.push(p);
        if let Some(nested) = p["panels"].as_array() {
            out.extend(nested);
        }
    }
    out
}

fn title(p: &Value) -> &str {
    p["title"].as_str().unwrap_or("(untitled)")
}

/// Every panel query: (where, PromQL, legend format).
fn queries(d: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or("");
            let legend = t["legendFormat"].as_str().unwrap_or("");
            out.push((
                format!("panel {:?}", title(p)),
                expr.to_string(),
                legend.to_string(),
            ));
        }
    }
    out
}

/// The labels a legend format refers to (`{{label}}`).
fn legend_labels(legend: &str) -> Vec<&str> {
    legend
        .split("{{")
        .skip(1)
        .filter_map(|rest| rest.split_once("}}"))
        .map(|(label, _)| label.trim())
        .collect()
}

/// The query of a `query` variable.
fn variable_query(v: &Value) -> Option<&str> {
    match &v["query"] {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("query").and_then(Value::as_str),
        _ => None,
    }
}

#[test]
fn it_is_a_grafana_dashboard() {
    let d = dashboard();
    assert!(
        d["title"].as_str().is_some_and(|t| !t.is_empty()),
        "no title"
    );
    let uid = d["uid"].as_str().expect("no uid");
    assert!(
        !uid.is_empty() && uid.len() <= 40,
        "uid {uid:?}: 1 to 40 characters"
    );
    let schema = d["schemaVersion"].as_u64().expect("no schemaVersion");
    assert!(
        schema >= 36,
        "schemaVersion {schema} predates datasource refs"
    );
    assert!(
        d["templating"]["list"].is_array(),
        "no templating variables"
    );

    let all = panels(&d);
    assert!(all.len() > 10, "only {} panels", all.len());
    let mut ids = BTreeSet::new();
    let mut boxes: Vec<(&str, [u64; 4])> = Vec::new();
    for p in &all {
        let name = title(p);
        let id = p["id"].as_u64().unwrap_or_else(|| panic!("{name}: no id"));
        assert!(ids.insert(id), "{name}: id {id} used twice");
        let g = &p["gridPos"];
        let pos = ["x", "y", "w", "h"].map(|k| {
            g[k].as_u64()
                .unwrap_or_else(|| panic!("{name}: no gridPos.{k}"))
        });
        let [x, _, w, h] = pos;
        assert!(w >= 1 && h >= 1 && x + w <= 24, "{name}: gridPos {g}");
        boxes.push((name, pos));

        let kind = p["type"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no type"));
        assert!(
            [
                "row",
                "timeseries",
                "stat",
                "gauge",
                "bargauge",
                "table",
                "state-timeline"
            ]
            .contains(&kind),
            "{name}: panel type {kind:?}"
        );
        if kind == "row" {
            assert!(p["targets"].is_null(), "row {name} has queries");
            continue;
        }
        assert!(
            p["title"].as_str().is_some_and(|t| !t.is_empty()),
            "a {kind} panel has no title"
        );
        assert_eq!(p["datasource"]["uid"], DATASOURCE_UID, "{name}: datasource");
        assert_eq!(p["datasource"]["type"], "prometheus", "{name}: datasource");
        let targets = p["targets"]
            .as_array()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| panic!("{name}: no queries"));
        let mut refs = BTreeSet::new();
        for t in targets {
            let r = t["refId"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: no refId"));
            assert!(refs.insert(r), "{name}: refId {r} twice");
            assert!(
                t["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "{name}/{r}: no expr"
            );
            if !t["datasource"].is_null() {
                assert_eq!(t["datasource"], p["datasource"], "{name}/{r}: datasource");
            }
        }
    }
    // Panels do not overlap (collapsed rows' panels keep their expanded positions).
    for (i, (a, [ax, ay, aw, ah])) in boxes.iter().enumerate() {
        for (b, [bx, by, bw, bh]) in &boxes[i + 1..] {
            let apart = ax + aw <= *bx || bx + bw <= *ax || ay + ah <= *by || by + bh <= *ay;
            assert!(apart, "panels {a:?} and {b:?} overlap");
        }
    }
}

#[test]
fn every_query_names_metrics_the_exporter_emits() {
    let d = dashboard();
    let cat = catalogue();
    let mut problems = Vec::new();
    for (place, expr, legend) in queries(&d) {
        match analyse(&expr) {
            Ok(a) if a.metrics.is_empty() => {
                problems.push(format!("{place}: {expr:?} names no metric"))
            }
            Ok(a) => {
                problems.extend(
                    check(&a, &cat)
                        .into_iter()
                        .map(|p| format!("{place}: {p} in {expr:?}")),
                );
                for label in legend_labels(&legend) {
                    let known = TARGET_LABELS.contains(&label)
                        || a.metrics
                            .iter()
                            .any(|m| cat.get(&m.name).is_some_and(|e| e.labels.contains(&label)));
                    if !known {
                        problems.push(format!(
                            "{place}: legend {legend:?} names label {label:?}, which no metric of {expr:?} has"
                        ));
                    }
                }
            }
            Err(e) => problems.push(format!("{place}: {e} in {expr:?}")),
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] != "query" {
            continue;
        }
        let name = v["name"].as_str().unwrap_or("?");
        let query = variable_query(v).unwrap_or_else(|| panic!("variable {name}: no query"));
        let (selector, label) = label_values(query)
            .unwrap_or_else(|| panic!("variable {name}: {query:?} is not label_values(…, label)"));
        match analyse(selector) {
            Ok(a) => {
                problems.extend(
                    check(&a, &cat)
                        .into_iter()
                        .map(|p| format!("variable {name}: {p}")),
                );
                let has_label = a.metrics.iter().any(|m| {
                    cat.get(&m.name).is_some_and(|e| {
                        e.labels.contains(&label) || TARGET_LABELS.contains(&label)
                    })
                });
                if !has_label {
                    problems.push(format!(
                        "variable {name}: no metric in {selector:?} has label {label:?}"
                    ));
                }
            }
            Err(e) => problems.push(format!("variable {name}: {e} in {query:?}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_variable_is_defined_and_used() {
    let d = dashboard();
    let defined: BTreeSet<String> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v["name"]
                .as_str()
                .expect("a variable without name")
                .to_string()
        })
        .collect();
    assert!(defined.contains("DS_PROMETHEUS"), "no datasource variable");
    let ds = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "DS_PROMETHEUS")
        .unwrap();
    assert_eq!(ds["type"], "datasource");
    assert_eq!(ds["query"], "prometheus");

    let mut used = BTreeSet::new();
    strings(&d, &mut |s| used.extend(variables_in(s)));
    for v in &used {
        assert!(
            defined.contains(v) || BUILTIN_VARIABLES.contains(&v.as_str()),
            "${v} is used but not defined"
        );
    }
    for v in &defined {
        assert!(used.contains(v), "variable {v} is defined but never used");
    }
}

#[test]
fn every_source_is_on_the_dashboard() {
    let d = dashboard();
    let cat = catalogue();
    let mut used = BTreeSet::new();
    for (_, expr, _) in queries(&d) {
        if let Ok(a) = analyse(&expr) {
            used.extend(a.metrics.into_iter().map(|m| m.name));
        }
    }
    let unused: Vec<&str> = cat
        .keys()
        .filter(|n| !used.contains(*n))
        .map(String::as_str)
        .collect();
    if !unused.is_empty() {
        eprintln!("families not on the dashboard: {unused:?}");
    }
    let sources = cat.values().map(|e| e.source).collect::<BTreeSet<_>>();
    for source in sources {
        assert!(
            cat.values()
                .any(|e| e.source == source && used.contains(&e.name)),
            "no family of source {:?} is on the dashboard",
            source.map_or("(the exporter)", SourceKind::name)
        );
    }
}

#[test]
fn readme_describes_every_family() {
    let missing: Vec<String> = catalogue()
        .into_keys()
        .filter(|n| !README.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "slurm-exporter/README.md does not describe these families: {missing:?}"
    );
}

#[test]
fn the_analyser_finds_names_labels_and_functions() {
    let a = analyse(
        r#"topk(5, sum by (partition) (rate(slurm_a_total{state=~"x|y", instance="$instance"}[$__rate_interval] offset 5m)) / on (partition) group_left slurm_b) > bool 0 and slurm_c"#,
    )
    .unwrap();
    let names: Vec<(&str, Option<&str>, Vec<&str>)> = a
        .metrics
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.function.as_deref(),
                m.labels.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("slurm_a_total", Some("rate"), vec!["state", "instance"]),
            ("slurm_b", Some("topk"), vec![]),
            ("slurm_c", None, vec![]),
        ]
    );
    assert_eq!(a.grouping, ["partition", "partition"]);
    assert!(analyse("rat(slurm_a[5m])").unwrap_err().contains("rat"));
    assert!(analyse(r#"{__name__="slurm_a"}"#).is_err());
    assert!(analyse("sum(slurm_a").is_err());
    assert_eq!(
        label_values(r#"label_values(slurm_x{a="b, c"}, part)"#),
        Some((r#"slurm_x{a="b, c"}"#, "part"))
    );
    assert_eq!(
        legend_labels("{{account}}/{{ user }} x"),
        ["account", "user"]
    );
    assert_eq!(
        variables_in("${DS_PROMETHEUS} $instance [[old]] ${x:regex} $__rate_interval 5$"),
        ["DS_PROMETHEUS", "instance", "old", "x", "__rate_interval"]
    );
}

#[test]
fn the_checks_catch_mistakes() {
    let cat = catalogue();
    let problems = |expr: &str| check(&analyse(expr).unwrap(), &cat).join("; ");
    assert_eq!(
        problems(r#"sum by (state) (slurm_nodes{instance="a"})"#),
        ""
    );
    for (expr, expected) in [
        (
            "slurm_jobs_submitted",
            "not emitted (did you mean slurm_jobs_submitted_total?)",
        ),
        (
            "rate(slurm_nodes[5m])",
            "rate() of slurm_nodes, which is not a counter",
        ),
        ("slurm_jobs_submitted_total", "must be inside rate()"),
        ("sum(slurm_rpc_calls_total)", "not sum"),
        (
            r#"slurm_nodes{partition="x"}"#,
            "slurm_nodes has no label \"partition\"",
        ),
        (
            "sum by (bogus) (slurm_nodes)",
            "no metric of the query has label \"bogus\"",
        ),
        ("deriv(slurm_rpc_calls_total[5m])", "must be inside rate()"),
    ] {
        let got = problems(expr);
        assert!(got.contains(expected), "{expr}: {got:?}");
    }
}

// ------------------------------------------------------------------ checking

/// What a query must satisfy against the catalogue.
fn check(a: &Analysis, cat: &BTreeMap<String, Entry>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut known_labels: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
    for m in &a.metrics {
        let Some(entry) = cat.get(&m.name) else {
            let hint = (cat.keys().find(|k| k.starts_with(&m.name)))
                .or_else(|| cat.keys().rev().find(|k| m.name.starts_with(k.as_str())));
            problems.push(match hint {
                Some(h) => format!("{} is not emitted (did you mean {h}?)", m.name),
                None => format!("{} is not emitted", m.name),
            });
            continue;
        };
        known_labels.extend(entry.labels.iter().copied());
        for l in &m.labels {
            if !entry.labels.contains(&l.as_str()) && !TARGET_LABELS.contains(&l.as_str()) {
                problems.push(format!(
                    "{} has no label {l:?} (it has {:?})",
                    m.name, entry.labels
                ));
            }
        }
        let f = m.function.as_deref().unwrap_or("");
        match entry.kind {
            Kind::Counter if !COUNTER_FUNCTIONS.contains(&f) => problems.push(format!(
                "counter {} must be inside rate()/irate()/increase(), not {}",
                m.name,
                if f.is_empty() { "used raw" } else { f }
            )),
            Kind::Gauge | Kind::Info if COUNTER_FUNCTIONS.contains(&f) => {
                problems.push(format!("{f}() of {}, which is not a counter", m.name))
            }
            Kind::Counter if GAUGE_FUNCTIONS.contains(&f) => {
                problems.push(format!("{f}() of counter {}", m.name))
            }
            _ => {}
        }
    }
    for l in &a.grouping {
        if !known_labels.contains(l.as_str()) {
            problems.push(format!("no metric of the query has label {l:?}"));
        }
    }
    problems
}

/// Functions whose argument must be a counter.
const COUNTER_FUNCTIONS: [&str; 4] = ["rate", "irate", "increase", "resets"];
/// Functions meant for gauges.
const GAUGE_FUNCTIONS: [&str; 5] = ["deriv", "delta", "idelta", "predict_linear", "changes"];

// ------------------------------------------------------------------ PromQL

const AGGREGATIONS: [&str; 14] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

const FUNCTIONS: [&str; 68] = [
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "exp",
    "floor",
    "histogram_quantile",
    "holt_winters",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_desc",
    "sort_by_label",
    "sqrt",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "vector",
    "year",
];

/// Words followed by a list of label names in parentheses.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
/// Operator words and modifiers.
const OPERATOR_WORDS: [&str; 7] = ["and", "or", "unless", "bool", "offset", "atan2", "start"];

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(char),
    /// Numbers, durations, range selectors, variables: nothing to check.
    Other,
}

fn tokens(expr: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' || c == '`' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("unterminated string".into()),
                    Some('\\') if c != '`' => {
                        s.extend(chars.get(i + 1));
                        i += 2;
                    }
                    Some(&q) if q == c => {
                        i += 1;
                        break;
                    }
                    Some(&o) => {
                        s.push(o);
                        i += 1;
                    }
                }
            }
            out.push(Tok::Str(s));
        } else if c == '[' {
            let end = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .ok_or("unterminated range")?;
            i += end + 1;
            out.push(Tok::Other);
        } else if c == '$' {
            i += 1;
            if chars.get(i) == Some(&'{') {
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == '}')
                    .ok_or("unterminated ${…}")?;
                i += end + 1;
            } else {
                while chars
                    .get(i)
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_')
                {
                    i += 1;
                }
            }
            out.push(Tok::Other);
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while chars
                .get(i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '.')
            {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    Ok(out)
}

/// One metric named in a query.
#[derive(Debug)]
struct MetricUse {
    name: String,
    /// Labels matched in its selector.
    labels: Vec<String>,
    /// The innermost function or aggregation it is an argument of.
    function: Option<String>,
}

#[derive(Debug)]
struct Analysis {
    metrics: Vec<MetricUse>,
    /// Labels in by/without/on/ignoring/group_left/group_right lists.
    grouping: Vec<String>,
}

/// Finds the metrics, their selector labels and enclosing functions, and the grouping
/// labels of a PromQL expression. Unknown functions and unbalanced parentheses are errors.
fn analyse(expr: &str) -> Result<Analysis, String> {
    let toks = tokens(expr)?;
    let mut a = Analysis {
        metrics: Vec::new(),
        grouping: Vec::new(),
    };
    // Open parentheses: the function or aggregation each belongs to (None: grouping).
    let mut stack: Vec<Option<String>> = Vec::new();
    let mut pending: Option<String> = None;
    let mut i = 0;
    let next_is = |i: usize, c: char| toks.get(i) == Some(&Tok::Punct(c));
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(word) => {
                let lower = word.to_ascii_lowercase();
                if LABEL_LISTS.contains(&lower.as_str()) {
                    // `group_left` may stand without a list.
                    if next_is(i + 1, '(') {
                        i += 2;
                        loop {
                            match toks.get(i) {
                                Some(Tok::Ident(l)) => a.grouping.push(l.clone()),
                                Some(Tok::Punct(',')) => {}
                                Some(Tok::Punct(')')) => break,
                                other => return Err(format!("{other:?} in a {word}(…) list")),
                            }
                            i += 1;
                        }
                    }
                } else if OPERATOR_WORDS.contains(&lower.as_str())
                    || ["inf", "nan"].contains(&lower.as_str())
                {
                } else if next_is(i + 1, '(') {
                    if !FUNCTIONS.contains(&word.as_str()) && !AGGREGATIONS.contains(&word.as_str())
                    {
                        return Err(format!("unknown function {word}()"));
                    }
                    pending = Some(word.clone());
                } else if AGGREGATIONS.contains(&word.as_str()) {
                    // `sum by (…) (…)`: the aggregation's parenthesis comes after the list.
                    pending = Some(word.clone());
                } else {
                    let mut m = MetricUse {
                        name: word.clone(),
                        labels: Vec::new(),
                        function: stack.iter().rev().flatten().next().cloned(),
                    };
                    if next_is(i + 1, '{') {
                        i += 2;
                        m.labels = matchers(&toks, &mut i)?;
                    }
                    a.metrics.push(m);
                }
            }
            Tok::Punct('(') => stack.push(pending.take()),
            Tok::Punct(')') => {
                stack.pop().ok_or("unbalanced )")?;
            }
            Tok::Punct('{') => return Err("a selector without a metric name".into()),
            _ => {}
        }
        i += 1;
    }
    if !stack.is_empty() {
        return Err("unbalanced (".into());
    }
    Ok(a)
}

/// The label names of `{l="v", …}`, from just after `{` to the closing `}` (at `*i`).
fn matchers(toks: &[Tok], i: &mut usize) -> Result<Vec<String>, String> {
    let mut labels = Vec::new();
    loop {
        match toks.get(*i) {
            Some(Tok::Punct('}')) => return Ok(labels),
            Some(Tok::Punct(',')) => *i += 1,
            Some(Tok::Ident(l)) => {
                labels.push(l.clone());
                *i += 1;
                while let Some(Tok::Punct('=' | '!' | '~')) = toks.get(*i) {
                    *i += 1;
                }
                match toks.get(*i) {
                    Some(Tok::Str(_)) => *i += 1,
                    other => return Err(format!("label {l} matched against {other:?}")),
                }
            }
            other => return Err(format!("{other:?} in a selector")),
        }
    }
}

/// `label_values(selector, label)` → (selector, label).
fn label_values(query: &str) -> Option<(&str, &str)> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let (selector, label) = inner.rsplit_once(',')?;
    Some((selector.trim(), label.trim()))
}

/// The variables a string refers to: `$name`, `${name}`, `${name:format}`, `[[name]]`.
fn variables_in(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let word = |from: usize| {
        s[from..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(&s[from..], |end| &s[from..from + end])
    };
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && b.get(i + 1) == Some(&b'{') {
            let name = word(i + 2);
            out.push(name.to_string());
            i += 2 + name.len();
        } else if b[i] == b'$' {
            let name = word(i + 1);
            if !name.is_empty() {
                out.push(name.to_string());
            }
            i += 1 + name.len();
        } else if b[i] == b'[' && b.get(i + 1) == Some(&b'[') {
            let name = word(i + 2);
            if !name.is_empty() {
                out.push(name.to_string());
            }
            i += 2 + name.len();
        } else {
            i += 1;
        }
    }
    out
}

/// Calls `f` on every string value in the JSON.
fn strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|v| strings(v, f)),
        Value::Object(o) => o.values().for_each(|v| strings(v, f)),
        _ => {}
    }
}
