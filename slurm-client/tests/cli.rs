//! The `slurm` command-line tool, run as a process against the real clusters (see
//! `tests/common/mod.rs` for how they are found). Needs `--features cli`.

use crate::common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::Cluster;
use serde_json::Value;

/// Exit codes documented in `slurm --help`.
const REJECTED: i32 = 1;
const USAGE: i32 = 2;
const AUTH: i32 = 3;
const NOT_FOUND: i32 = 4;
const UNREACHABLE: i32 = 5;
const UNSUPPORTED: i32 = 6;

/// `slurm` with a clean environment: only what `vars` sets.
fn slurm_with(vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_slurm"));
    cmd.env_clear().args(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("run the slurm binary")
}

/// `slurm` configured for `cluster` through the environment, as root.
fn slurm(cluster: &Cluster, args: &[&str]) -> Output {
    slurm_with(
        &[
            ("SLURM_REST_URL", cluster.url()),
            ("SLURM_JWT", cluster.jwt()),
            ("SLURM_USER_NAME", cluster.user()),
        ],
        args,
    )
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts success and parses stdout as JSON.
fn json_ok(cluster: &Cluster, out: &Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{}: `slurm {what}` failed with {}: {}",
        cluster.source,
        out.status,
        stderr(out)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: `slurm {what}` printed no JSON ({e}): {}",
            cluster.source,
            stdout(out)
        )
    })
}

fn assert_code(cluster: &Cluster, out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}: `slurm {what}`: stdout {} stderr {}",
        cluster.source,
        stdout(out),
        stderr(out)
    );
    assert!(
        stderr(out).lines().any(|l| l.starts_with("error: ")),
        "{}: `slurm {what}` should explain itself on stderr: {}",
        cluster.source,
        stderr(out)
    );
}

/// Submits `sleep 300` named `name` with these extra flags; returns the job id.
fn submit_sleep(cluster: &Cluster, name: &str, flags: &[&str]) -> String {
    let args = [
        &["jobs", "submit", "--wrap", "sleep 300", "--name", name][..],
        flags,
        &["--output", "json"],
    ]
    .concat();
    let what = args.join(" ");
    let submitted = json_ok(cluster, &slurm(cluster, &args), &what);
    let id = submitted["job_id"].as_u64().expect("job_id");
    assert!(id > 0, "{}: {submitted}", cluster.source);
    id.to_string()
}

/// Calls `check` every half second until it gives a value; after `limit`, panics with its
/// last complaint.
fn poll<T>(limit: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(value) => return value,
            Err(complaint) if Instant::now() >= deadline => panic!("{complaint}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", std::process::id())
}

#[test]
fn ping_reports_version_release_and_a_responding_controller() {
    for cluster in common::clusters() {
        let out = slurm(&cluster, &["ping", "--output", "json"]);
        let ping = json_ok(&cluster, &out, "ping");
        let release = ping["release"].as_str().expect("release");
        if let Some(r) = cluster.release() {
            assert!(release.starts_with(r), "{}: {ping}", cluster.source);
        }
        let version = ping["rest_version"].as_str().unwrap();
        let served: Vec<&str> = ping["served_versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(served.contains(&version), "{}: {ping}", cluster.source);
        let controllers = ping["controllers"].as_array().unwrap();
        assert!(!controllers.is_empty(), "{}: {ping}", cluster.source);
        assert!(
            controllers.iter().all(|c| c["responding"] == true),
            "{}: {ping}",
            cluster.source
        );

        // The table names the same things.
        let table = stdout(&slurm(&cluster, &["ping"]));
        assert!(
            table.contains(release) && table.contains(version),
            "{table}"
        );
    }
}

#[test]
fn pinned_rest_version_is_used_or_refused_with_exit_6() {
    for cluster in common::clusters() {
        // v0.0.42 is served by both 24.11 and 26.05.
        let out = slurm(
            &cluster,
            &["--rest-version", "v0.0.42", "ping", "-o", "json"],
        );
        let ping = json_ok(&cluster, &out, "--rest-version v0.0.42 ping");
        assert_eq!(ping["rest_version"], "v0.0.42", "{}", cluster.source);

        let unserved = match cluster.release() {
            Some("24.11") => "v0.0.45",
            Some("26.05") => "v0.0.40",
            _ => continue,
        };
        let out = slurm(&cluster, &["--rest-version", unserved, "ping"]);
        assert_code(&cluster, &out, UNSUPPORTED, "ping with an unserved version");
    }
}

#[test]
fn submit_show_cancel_with_json_output() {
    for cluster in common::clusters() {
        let name = unique("cli-submit");
        let id = submit_sleep(&cluster, &name, &["--time", "5"]);

        let job = json_ok(
            &cluster,
            &slurm(&cluster, &["jobs", "show", &id, "-o", "json"]),
            "jobs show",
        );
        assert_eq!(job["id"].to_string(), id, "{job}");
        assert_eq!(job["name"], name.as_str(), "{job}");
        assert_eq!(job["user"], cluster.user(), "{job}");
        assert_eq!(job["time_limit_minutes"], 5, "{job}");
        assert_eq!(job["working_directory"], "/tmp", "{job}");

        // The listing has it too, filtered by name.
        let list = json_ok(
            &cluster,
            &slurm(&cluster, &["jobs", "list", "--names", &name, "-o", "json"]),
            "jobs list",
        );
        let ids: Vec<String> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].to_string())
            .collect();
        assert_eq!(ids, std::slice::from_ref(&id), "{}: {list}", cluster.source);

        let cancelled = json_ok(
            &cluster,
            &slurm(&cluster, &["jobs", "cancel", &id, "-o", "json"]),
            "jobs cancel",
        );
        assert_eq!(cancelled[0]["ok"], true, "{cancelled}");

        poll(Duration::from_secs(30), || {
            let job = json_ok(
                &cluster,
                &slurm(&cluster, &["jobs", "show", &id, "-o", "json"]),
                "jobs show",
            );
            if job["state"] == "CANCELLED" {
                Ok(())
            } else {
                Err(format!("{}: job {id} not cancelled: {job}", cluster.source))
            }
        });
    }
}

#[test]
fn script_file_with_sbatch_directives() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("job.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n#SBATCH --job-name=from-directive -t 10\n#SBATCH --hold\n#SBATCH --mail-type=END\nsleep 300\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    for cluster in common::clusters() {
        let out = slurm(
            &cluster,
            &["jobs", "submit", script, "--time", "3", "-o", "json"],
        );
        let id = json_ok(&cluster, &out, "jobs submit SCRIPT")["job_id"].to_string();
        assert!(
            stderr(&out).contains("--mail-type=END"),
            "unsupported directive reported: {}",
            stderr(&out)
        );
        let job = json_ok(
            &cluster,
            &slurm(&cluster, &["jobs", "show", &id, "-o", "json"]),
            "jobs show",
        );
        assert_eq!(job["name"], "from-directive", "{}: {job}", cluster.source);
        assert_eq!(job["time_limit_minutes"], 3, "flag beats directive: {job}");
        assert_eq!(job["held"], true, "{}: {job}", cluster.source);
        let out = slurm(&cluster, &["jobs", "cancel", &id]);
        assert!(out.status.success(), "{}: {}", cluster.source, stderr(&out));
    }
}

#[test]
fn hold_and_release_a_pending_job() {
    for cluster in common::clusters() {
        let name = unique("cli-hold");
        let id = submit_sleep(&cluster, &name, &["--time", "5", "--hold"]);
        let job = json_ok(
            &cluster,
            &slurm(&cluster, &["jobs", "show", &id, "-o", "json"]),
            "jobs show",
        );
        assert_eq!(job["held"], true, "{}: {job}", cluster.source);

        let out = slurm(&cluster, &["jobs", "release", &id]);
        assert!(out.status.success(), "{}: {}", cluster.source, stderr(&out));
        assert_eq!(stdout(&out), format!("Job {id} released\n"));
        let job = json_ok(
            &cluster,
            &slurm(&cluster, &["jobs", "show", &id, "-o", "json"]),
            "jobs show",
        );
        assert_eq!(job["held"], false, "{}: {job}", cluster.source);

        // Requeue needs REST v0.0.45: pinned to v0.0.42 it is refused with exit code 6.
        let out = slurm(
            &cluster,
            &["--rest-version", "v0.0.42", "jobs", "requeue", &id],
        );
        assert_code(&cluster, &out, UNSUPPORTED, "jobs requeue on v0.0.42");
        assert!(stderr(&out).contains("not supported"), "{}", stderr(&out));

        let out = slurm(&cluster, &["jobs", "cancel", &id]);
        assert!(out.status.success(), "{}: {}", cluster.source, stderr(&out));
    }
}

#[test]
fn nodes_list_and_show_with_json_output() {
    for cluster in common::clusters() {
        let nodes = json_ok(
            &cluster,
            &slurm(&cluster, &["nodes", "list", "--output", "json"]),
            "nodes list",
        );
        let nodes = nodes.as_array().expect("an array of nodes");
        assert!(!nodes.is_empty(), "{}", cluster.source);
        for node in nodes {
            assert!(
                node["name"].as_str().is_some_and(|n| !n.is_empty()),
                "{node}"
            );
            assert!(node["state"].as_str().is_some(), "{node}");
            assert!(node["cpus"].as_u64().is_some_and(|c| c > 0), "{node}");
            assert!(node["state_flags"].is_array(), "{node}");
        }
        let name = nodes[0]["name"].as_str().unwrap();
        let node = json_ok(
            &cluster,
            &slurm(&cluster, &["nodes", "show", name, "-o", "json"]),
            "nodes show",
        );
        assert_eq!(node["name"], name, "{node}");

        // `slurm nodes` alone lists them as a table.
        let table = stdout(&slurm(&cluster, &["nodes"]));
        assert!(table.starts_with("NODE "), "{table}");
        assert!(table.contains(name), "{table}");
    }
}

#[test]
fn partitions_reservations_licenses_and_diag() {
    for cluster in common::clusters() {
        let run = |args: &[&str]| json_ok(&cluster, &slurm(&cluster, args), &args.join(" "));
        let partitions = run(&["partitions", "-o", "json"]);
        let debug = partitions
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "debug")
            .unwrap_or_else(|| panic!("{}: no debug partition: {partitions}", cluster.source));
        assert!(debug["node_count"].as_u64().unwrap() > 0, "{debug}");
        let shown = run(&["partitions", "show", "debug", "-o", "json"]);
        assert_eq!(shown["name"], "debug", "{shown}");

        assert!(run(&["reservations", "-o", "json"]).is_array());
        assert!(run(&["licenses", "-o", "json"]).is_array());
        let diag = run(&["diag", "-o", "json"]);
        assert!(
            diag["jobs"]["submitted"].is_u64(),
            "{}: {diag}",
            cluster.source
        );

        let table = stdout(&slurm(&cluster, &["diag"]));
        assert!(table.contains("Jobs submitted:"), "{table}");
    }
}

#[test]
fn accounting_lists_and_job_history() {
    for cluster in common::clusters()
        .into_iter()
        .filter(|c| c.has_accounting())
    {
        let names = |what: &str, key: &str| -> Vec<String> {
            let list = json_ok(&cluster, &slurm(&cluster, &[what, "-o", "json"]), what);
            list.as_array()
                .unwrap_or_else(|| panic!("{what}: an array: {list}"))
                .iter()
                .map(|a| a[key].as_str().unwrap_or_default().to_string())
                .collect()
        };
        assert!(
            names("accounts", "name").contains(&"root".into()),
            "{}",
            cluster.source
        );
        assert!(
            names("users", "name").contains(&"root".into()),
            "{}",
            cluster.source
        );
        assert!(
            names("qos", "name").contains(&"normal".into()),
            "{}",
            cluster.source
        );
        let out = slurm(&cluster, &["accounts", "show", "no-such-account"]);
        assert_code(&cluster, &out, NOT_FOUND, "accounts show no-such-account");

        // A cancelled job reaches slurmdbd within seconds.
        let name = unique("cli-history");
        let id = submit_sleep(&cluster, &name, &["--hold"]);
        let out = slurm(&cluster, &["jobs", "cancel", &id]);
        assert!(out.status.success(), "{}: {}", cluster.source, stderr(&out));
        let wanted: u64 = id.parse().unwrap();
        let record = poll(Duration::from_secs(60), || {
            let out = slurm(&cluster, &["jobs", "history", "--jobs", &id, "-o", "json"]);
            let records = json_ok(&cluster, &out, "jobs history");
            let found = records
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["id"] == wanted && r["state"] == "CANCELLED");
            found.cloned().ok_or_else(|| {
                format!(
                    "{}: job {id} not in the history as CANCELLED: {records}",
                    cluster.source
                )
            })
        });
        assert_eq!(record["name"], name.as_str(), "{record}");
    }
}

#[test]
fn unknown_job_exits_4() {
    for cluster in common::clusters() {
        let out = slurm(&cluster, &["jobs", "show", "999999999"]);
        assert_code(&cluster, &out, NOT_FOUND, "jobs show 999999999");
        let out = slurm(&cluster, &["jobs", "cancel", "999999999", "-o", "json"]);
        assert_code(&cluster, &out, NOT_FOUND, "jobs cancel 999999999");
        let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(outcome[0]["ok"], false, "{outcome}");
        assert!(stderr(&out).contains("2017"), "{}", stderr(&out));
    }
}

/// Runs `slurm ARGS`, which must exit with `code` and name `what` (e.g. `node x`) first on
/// stderr.
fn fails_naming(cluster: &Cluster, args: &[&str], code: i32, what: &str) -> Output {
    let out = slurm(cluster, args);
    let command = args.join(" ");
    assert_code(cluster, &out, code, &command);
    assert!(
        stderr(&out).starts_with(&format!("error: {what}: ")),
        "{}: `slurm {command}` should name {what}: {}",
        cluster.source,
        stderr(&out)
    );
    out
}

/// Like [`fails_naming`] for a `show` command, as a table and as JSON: nothing is
/// half-printed on stdout.
fn show_fails_naming(cluster: &Cluster, args: &[&str], what: &str) {
    let json = [args, &["-o", "json"]].concat();
    for args in [args, &json] {
        let out = fails_naming(cluster, args, NOT_FOUND, what);
        assert_eq!(stdout(&out), "", "{}: {}", cluster.source, args.join(" "));
    }
}

#[test]
fn unknown_node_exits_4_naming_it() {
    const NODE: &str = "no-such-node";
    let what = format!("node {NODE}");
    for cluster in common::clusters() {
        show_fails_naming(&cluster, &["nodes", "show", NODE], &what);

        // Actions on several nodes report one outcome per node, in JSON too.
        for args in [
            &["nodes", "drain", NODE, "--reason", "cli test", "-o", "json"][..],
            &["nodes", "resume", NODE, "-o", "json"],
            &["nodes", "down", NODE, "--reason", "cli test", "-o", "json"],
        ] {
            let out = fails_naming(&cluster, args, NOT_FOUND, &what);
            let outcome: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!(
                    "{}: `slurm {}` printed no JSON ({e}): {}",
                    cluster.source,
                    args.join(" "),
                    stdout(&out)
                )
            });
            assert_eq!(outcome[0]["node"], NODE, "{outcome}");
            assert_eq!(outcome[0]["action"], args[1], "{outcome}");
            assert_eq!(outcome[0]["ok"], false, "{outcome}");
            assert!(
                outcome[0]["error"]
                    .as_str()
                    .is_some_and(|e| e.contains(NODE)),
                "{}: {outcome}",
                cluster.source
            );
        }
        // The table form prints no success line.
        let args = ["nodes", "drain", NODE, "--reason", "cli test"];
        let out = fails_naming(&cluster, &args, NOT_FOUND, &what);
        assert_eq!(stdout(&out), "", "{}", cluster.source);
    }
}

#[test]
fn unknown_partition_exits_4_on_show_and_1_on_submit_naming_it() {
    const PARTITION: &str = "no-such-partition";
    for cluster in common::clusters() {
        let what = format!("partition {PARTITION}");
        show_fails_naming(&cluster, &["partitions", "show", PARTITION], &what);

        // Slurm rejects the job (24.11: HTTP 500, 26.05: 422) without naming the partition;
        // the tool names it.
        let name = unique("cli-bad-partition");
        let args = [
            "jobs",
            "submit",
            "--wrap",
            "true",
            "--name",
            &name,
            "--time",
            "1",
            "--partition",
            PARTITION,
            "-o",
            "json",
        ];
        let what = format!("job submission (partition {PARTITION})");
        let out = fails_naming(&cluster, &args, REJECTED, &what);
        assert!(
            stderr(&out).contains("  slurm: "),
            "{}: Slurm's reason is shown: {}",
            cluster.source,
            stderr(&out)
        );
        assert_eq!(stdout(&out), "", "no SubmittedJob printed");
        let list = json_ok(
            &cluster,
            &slurm(&cluster, &["jobs", "list", "--names", &name, "-o", "json"]),
            "jobs list",
        );
        assert_eq!(
            list,
            Value::Array(vec![]),
            "{}: no job queued",
            cluster.source
        );
    }
}

#[test]
fn rejected_token_exits_3_without_showing_it() {
    const BAD: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.c2VjcmV0LXNpZ25hdHVyZQ";
    for cluster in common::clusters() {
        let vars = [
            ("SLURM_REST_URL", cluster.url()),
            ("SLURM_JWT", BAD),
            ("SLURM_USER_NAME", "root"),
        ];
        for args in [
            &["jobs", "list"][..],
            &["ping"],
            &["-vv", "jobs", "show", "1"],
        ] {
            let out = slurm_with(&vars, args);
            assert_code(&cluster, &out, AUTH, &args.join(" "));
            let all = format!("{}{}", stdout(&out), stderr(&out));
            assert!(
                !all.contains(BAD),
                "{}: token leaked: {all}",
                cluster.source
            );
            assert!(
                !all.contains("c2VjcmV0LXNpZ25hdHVyZQ"),
                "{}: token signature leaked: {all}",
                cluster.source
            );
        }
    }
}

#[test]
fn unreachable_server_exits_5() {
    // Port 1 on loopback: nothing listens there.
    let out = slurm_with(
        &[
            ("SLURM_REST_URL", "http://127.0.0.1:1"),
            ("SLURM_JWT", "x.y.z"),
        ],
        &["ping"],
    );
    assert_eq!(out.status.code(), Some(UNREACHABLE), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: ") && err.contains("127.0.0.1:1"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn usage_and_configuration_errors_exit_2() {
    let out = slurm_with(&[], &["ping"]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", stderr(&out));
    assert!(stderr(&out).contains("SLURM_REST_URL"), "{}", stderr(&out));

    let out = slurm_with(&[("SLURM_REST_URL", "http://127.0.0.1:1")], &["ping"]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", stderr(&out));
    assert!(stderr(&out).contains("SLURM_JWT"), "{}", stderr(&out));

    let out = slurm_with(&[], &["jobs", "frobnicate"]);
    assert_eq!(out.status.code(), Some(USAGE));

    let out = slurm_with(
        &[("SLURM_REST_URL", "http://127.0.0.1:1"), ("SLURM_JWT", "x")],
        &["jobs", "submit", "/nonexistent/script.sh"],
    );
    assert_eq!(out.status.code(), Some(USAGE), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("/nonexistent/script.sh"),
        "{}",
        stderr(&out)
    );

    let out = slurm_with(
        &[],
        &["token", "--key", "/nonexistent/key", "--user", "root"],
    );
    assert_eq!(out.status.code(), Some(USAGE), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("/nonexistent/key"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn help_documents_exit_codes_and_json_fields() {
    let out = slurm_with(&[], &["--help"]);
    assert!(out.status.success());
    let help = stdout(&out);
    for needle in [
        "Exit codes",
        "3  authentication failed",
        "6  not supported",
        "JSON output",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}: {help}");
    }
}

#[test]
fn minted_token_round_trip() {
    for cluster in common::clusters() {
        let Some(key) = cluster.opt("SLURM_JWT_KEY") else {
            continue;
        };
        let out = slurm_with(
            &[],
            &[
                "token",
                "--key",
                key,
                "--user",
                cluster.user(),
                "--lifespan",
                "5m",
            ],
        );
        assert!(out.status.success(), "{}: {}", cluster.source, stderr(&out));
        let token = stdout(&out).trim().to_string();
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        assert_eq!(
            stdout(&out),
            format!("{token}\n"),
            "only the token is printed"
        );

        let vars = [
            ("SLURM_REST_URL", cluster.url()),
            ("SLURM_JWT", token.as_str()),
            ("SLURM_USER_NAME", cluster.user()),
        ];
        let out = slurm_with(&vars, &["ping", "-o", "json"]);
        json_ok(&cluster, &out, "ping with a minted token");
        let out = slurm_with(&vars, &["jobs", "list", "-o", "json"]);
        json_ok(&cluster, &out, "jobs list with a minted token");

        // Minting on the fly from the key, through the environment.
        let out = slurm_with(
            &[
                ("SLURM_REST_URL", cluster.url()),
                ("SLURM_JWT_KEY", key),
                ("SLURM_USER_NAME", cluster.user()),
            ],
            &["jobs", "list", "-o", "json"],
        );
        json_ok(&cluster, &out, "jobs list with SLURM_JWT_KEY");
    }
}

#[test]
fn get_prints_the_raw_answer() {
    for cluster in common::clusters() {
        let out = slurm(&cluster, &["get", "/slurm/{version}/diag"]);
        let diag = json_ok(&cluster, &out, "get /slurm/{version}/diag");
        assert!(
            diag.get("statistics").is_some(),
            "{}: {diag}",
            cluster.source
        );
    }
}
