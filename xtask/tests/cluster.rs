//! The cluster tooling itself, end to end, against real Slurm: needs root, starts and stops real clusters.
//! These tests must run while no other dev cluster is up (`cargo xtask test` sees to that).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Clusters of one release share a root, so the tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("running xtask")
}

fn ok(args: &[&str]) -> String {
    let out = xtask(args);
    assert!(
        out.status.success(),
        "xtask {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(args: &[&str]) -> String {
    let out = xtask(args);
    assert!(!out.status.success(), "xtask {args:?} should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// KEY=value pairs of a cluster's env file.
fn env_of(release: &str) -> Vec<(String, String)> {
    let path = PathBuf::from("/run/slurm-dev")
        .join(release)
        .join("cluster.env");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

fn var(env: &[(String, String)], key: &str) -> String {
    env.iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("{key} missing"))
        .1
        .clone()
}

/// Status code and body of a GET on the cluster's host port.
fn get(port: u16, path: &str, token: &str) -> (u16, String) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connecting to slurmrestd");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nX-SLURM-USER-TOKEN: {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default(),
    )
}

fn port(env: &[(String, String)]) -> u16 {
    var(env, "SLURM_REST_URL")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn netns_exists(slug: &str) -> bool {
    PathBuf::from(format!("/run/netns/slurm-dev-{slug}")).exists()
}

#[test]
fn up_down_and_up_again() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ok(&["slurm", "down"]);
    let summary = ok(&["slurm", "up", "--release", "26.05", "--nodes", "2"]);
    assert!(summary.contains("2 node(s)"), "{summary}");
    let env = env_of("26.05");
    let (status, body) = get(port(&env), "/slurm/v0.0.45/nodes", &var(&env, "SLURM_JWT"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("node2") && !body.contains("node3"), "{body}");

    let again = fails(&["slurm", "up", "--release", "26.05"]);
    assert!(again.contains("already running"), "{again}");
    let sinfo = ok(&[
        "slurm",
        "exec",
        "--release",
        "26.05",
        "--",
        "sinfo",
        "-h",
        "-o",
        "%P %D",
    ]);
    assert_eq!(sinfo.trim(), "debug* 2");

    ok(&["slurm", "down", "--release", "26.05"]);
    assert!(!netns_exists("2605"), "the network namespace outlived down");
    assert!(ok(&["slurm", "status"]).contains("26.05: not running"));
    ok(&["slurm", "up", "--release", "26.05", "--nodes", "1"]);
    ok(&["slurm", "down", "--release", "26.05"]);
}

#[test]
fn both_releases_at_once_with_and_without_accounting() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ok(&["slurm", "down"]);
    ok(&[
        "slurm",
        "up",
        "--release",
        "24.11",
        "--nodes",
        "2",
        "--accounting",
    ]);
    ok(&["slurm", "up", "--release", "26.05", "--nodes", "2"]);
    let old = env_of("24.11");
    let new = env_of("26.05");
    assert_ne!(port(&old), port(&new));

    let (status, body) = get(port(&old), "/slurm/v0.0.40/ping", &var(&old, "SLURM_JWT"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("24.11"), "{body}");
    let (status, body) = get(port(&new), "/slurm/v0.0.45/ping", &var(&new, "SLURM_JWT"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("26.05"), "{body}");

    // Accounting is served only where slurmdbd runs.
    let (status, body) = get(
        port(&old),
        "/slurmdb/v0.0.42/accounts",
        &var(&old, "SLURM_JWT"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("science"), "{body}");
    let (status, _) = get(
        port(&new),
        "/slurmdb/v0.0.45/accounts",
        &var(&new, "SLURM_JWT"),
    );
    assert_eq!(status, 404);

    // A REST version the release does not serve.
    let (status, _) = get(port(&new), "/slurm/v0.0.40/ping", &var(&new, "SLURM_JWT"));
    assert_eq!(status, 404);

    ok(&["slurm", "down"]);
    assert!(!netns_exists("2411") && !netns_exists("2605"));
}

#[test]
fn bad_token_is_rejected_by_the_real_server() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ok(&["slurm", "down"]);
    ok(&["slurm", "up", "--release", "24.11", "--nodes", "1"]);
    let env = env_of("24.11");
    let (status, body) = get(port(&env), "/slurm/v0.0.42/jobs", "not-a-token");
    assert_eq!(status, 511, "{body}");
    assert!(body.contains("1007"), "{body}");
    let (status, body) = get(
        port(&env),
        "/slurm/v0.0.42/jobs",
        &var(&env, "SLURM_TEST_USER_JWT"),
    );
    assert_eq!(status, 200, "{body}");
    ok(&["slurm", "down"]);
}

#[test]
fn down_after_a_killed_up_leaves_nothing_behind() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ok(&["slurm", "down"]);
    let mut up = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "slurm",
            "up",
            "--release",
            "26.05",
            "--nodes",
            "2",
            "--accounting",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it as soon as slurmctld is recorded: MariaDB and slurmdbd are up, the rest is not.
    let state = PathBuf::from("/run/slurm-dev/26.05/state.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&state).is_ok_and(|s| s.contains("slurmctld")) {
        assert!(Instant::now() < deadline, "up never got to slurmctld");
        std::thread::sleep(Duration::from_millis(20));
    }
    up.kill().unwrap();
    up.wait().unwrap();

    ok(&["slurm", "down", "--release", "26.05"]);
    assert!(!netns_exists("2605"));
    let root = std::fs::read_dir("/var/cache/slurm-dev/roots")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("sid-") && p.is_dir())
        .expect("sid root");
    let left: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| std::fs::read_link(e.path().join("root")).is_ok_and(|r| r == root))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| !s.contains(") Z "))
        })
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "processes left in the root after down: {left:?}"
    );

    ok(&["slurm", "up", "--release", "26.05", "--nodes", "1"]);
    ok(&["slurm", "down"]);
}

#[test]
fn a_taken_port_is_named() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ok(&["slurm", "down"]);
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    let err = fails(&["slurm", "up", "--release", "24.11", "--port", &port]);
    assert!(
        err.contains(&format!("port 127.0.0.1:{port} is taken")),
        "{err}"
    );
}
