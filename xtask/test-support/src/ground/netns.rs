//! How a process is started inside the ground's network namespace as if it ran in a pod: the
//! API server as the Service `default/kubernetes` (10.96.0.1:443, which netd forwards to the
//! host's 127.0.0.1:6443) in its kubeconfig, netd's DNS (10.96.0.10) as its resolver.
//!
//! One copy for two users: test-support's [`super::inside`] (processes a test owns) and
//! `cargo xtask demo operator` (an operator left running), which includes this file with
//! `#[path]` because xtask does not depend on test-support. Standard library only, therefore.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;

/// The ground's network namespace (`ip netns` name) and its file.
pub const NETNS: &str = "slurm-dev-kube";
pub const NETNS_PATH: &str = "/run/netns/slurm-dev-kube";

/// The API server as a pod sees it. Its serving certificate has this IP as a SAN.
pub const INSIDE_SERVER: &str = "https://10.96.0.1:443";

/// A pod's resolv.conf as the test kubelet writes it (for namespace `default`): netd's DNS.
pub const RESOLV_CONF: &str = "nameserver 10.96.0.10\n\
     search default.svc.cluster.local svc.cluster.local cluster.local\n\
     options ndots:5\n";

/// `$0` is the resolv.conf to mount, `$@` the command. The mount stays in the private mount
/// namespace `ip netns exec` made.
const WRAPPER: &str = r#"mount --bind "$0" /etc/resolv.conf && exec "$@""#;

/// The kubeconfig `text` with every `server:` line pointing at [`INSIDE_SERVER`]; `None` when it
/// names no server.
pub fn inside_server(text: &str) -> Option<String> {
    let mut replaced = 0;
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("server:") {
            let indent = &line[..line.len() - trimmed.len()];
            out.push_str(&format!("{indent}server: {INSIDE_SERVER}\n"));
            replaced += 1;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    (replaced > 0).then_some(out)
}

/// Writes `text` to `path` with mode 0600 (kubeconfigs hold a client key), atomically.
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    std::fs::rename(&tmp, path)
}

/// `ip netns exec` of `program args…` inside the ground, with `resolv` (a file holding
/// [`RESOLV_CONF`]) bind-mounted over /etc/resolv.conf and `KUBECONFIG` set to `kubeconfig` (one
/// whose server is [`INSIDE_SERVER`]). The caller adds stdio, environment and process group.
pub fn command<A: AsRef<OsStr>>(
    resolv: &Path,
    kubeconfig: &Path,
    program: &OsStr,
    args: impl IntoIterator<Item = A>,
) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", NETNS, "sh", "-c", WRAPPER])
        .arg(resolv)
        .arg(program)
        .args(args)
        .env("KUBECONFIG", kubeconfig);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_line_points_inside() {
        let text = "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: AAA\n    server: https://127.0.0.1:6443\n  name: ground\n";
        let out = inside_server(text).unwrap();
        assert!(out.contains("    server: https://10.96.0.1:443\n"), "{out}");
        assert!(!out.contains("127.0.0.1"), "{out}");
        assert!(out.contains("certificate-authority-data: AAA\n"));
        assert_eq!(inside_server("apiVersion: v1\n"), None);
    }
}
