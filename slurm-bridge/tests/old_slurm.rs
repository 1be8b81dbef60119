//! Against the real Slurm 24.11 of `cargo xtask slurm up` (REST v0.0.40–42: no external jobs):
//! the bridge refuses to start with an error that names the release, before it touches
//! Kubernetes. CI runs this file with the Slurm clusters, not on the test ground.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BRIDGE: &str = env!("CARGO_BIN_EXE_slurm-bridge");

#[test]
fn refuses_a_slurm_without_external_jobs() {
    let clusters = test_support::clusters();
    let Some(old) = clusters
        .iter()
        .find(|c| c.release().is_some_and(|r| r.starts_with("24.11")))
    else {
        panic!("no Slurm 24.11 among SLURM_TEST_ENV_FILES: cargo xtask slurm up --release 24.11");
    };
    let dir = std::env::temp_dir().join(format!("bridge-old-slurm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(&config, format!("slurmRestApi: {}\n", old.url())).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, old.jwt()).unwrap();
    // Never contacted: the bridge must stop before it talks to an API server.
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let mut child = Command::new(BRIDGE)
        .args(["--config", config.to_str().unwrap()])
        .args(["--slurm-jwt-file", token.to_str().unwrap()])
        .args([
            "--health-addr",
            "0",
            "--metrics-addr",
            "0",
            "--webhook-addr",
            "0",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the bridge still runs against Slurm 24.11 after 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    let release = old.release().unwrap();
    assert!(
        text.contains(release) && text.contains("no external jobs"),
        "the error names the release ({release}) and what it lacks:\n{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
