//! The one place that runs `ip` (iproute2).

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use tokio::process::Command;

const NETNS_DIR: &str = "/run/netns";

pub fn netns_path(name: &str) -> std::path::PathBuf {
    Path::new(NETNS_DIR).join(name)
}

pub fn netns_exists(name: &str) -> bool {
    netns_path(name).exists()
}

/// Runs `ip <args>`; the error carries the command line and ip's stderr.
pub async fn ip(args: &[&str]) -> Result<()> {
    output(args).await.map(drop)
}

/// Runs `ip -n <netns> <args>` (inside that network namespace); its stdout.
pub async fn in_netns(netns: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["-n", netns];
    all.extend_from_slice(args);
    output(&all).await
}

/// Runs `ip <args>`; its stdout, or an error with the command line and ip's stderr.
pub async fn output(args: &[&str]) -> Result<String> {
    let line = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("starting `{line}` (is iproute2 installed?)"))?;
    if !out.status.success() {
        bail!(
            "`{line}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Names of the network namespaces under `/run/netns` that start with `prefix`.
pub async fn netns_with_prefix(prefix: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut dir = match tokio::fs::read_dir(NETNS_DIR).await {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(e).context(format!("listing {NETNS_DIR}")),
    };
    while let Some(entry) = dir.next_entry().await? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

pub async fn add_netns(name: &str) -> Result<()> {
    ip(&["netns", "add", name]).await?;
    ip(&["-n", name, "link", "set", "lo", "up"]).await
}

/// Deletes the namespace; fine if it does not exist. Its interfaces go with it, and a veth's peer
/// in another namespace with them.
pub async fn delete_netns(name: &str) -> Result<()> {
    if netns_exists(name) {
        ip(&["netns", "delete", name]).await?;
    }
    Ok(())
}

#[derive(Deserialize)]
struct Link {
    ifname: String,
}

/// Names of the links of `kind` (`veth`, `bridge`) in namespace `netns`.
pub async fn links(netns: &str, kind: &str) -> Result<Vec<String>> {
    if !netns_exists(netns) {
        return Ok(Vec::new());
    }
    let out = output(&["-n", netns, "-json", "link", "show", "type", kind]).await?;
    let links: Vec<Link> = if out.trim().is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&out).with_context(|| format!("parsing `ip link` output {out:?}"))?
    };
    Ok(links.into_iter().map(|l| l.ifname).collect())
}

pub async fn link_exists(netns: &str, name: &str) -> bool {
    netns_exists(netns)
        && ip(&["-n", netns, "link", "show", "dev", name])
            .await
            .is_ok()
}

/// Deletes the link; fine if it does not exist. A veth whose peer's namespace was just deleted
/// vanishes a moment later, when the kernel frees that namespace: so it may go between a check and
/// the delete, and a missing device then is success. iproute2 says so in two ways: "Cannot find
/// device" when the name no longer resolves, "RTNETLINK answers: No such device" when it resolved
/// and the link went before the kernel took the delete (CI saw the second).
pub async fn delete_link(netns: &str, name: &str) -> Result<()> {
    if !netns_exists(netns) {
        return Ok(());
    }
    match ip(&["-n", netns, "link", "delete", "dev", name]).await {
        Err(e) if is_gone(&e.to_string()) => Ok(()),
        other => other,
    }
}

/// Whether `ip`'s error says the device is not there (any more).
fn is_gone(error: &str) -> bool {
    error.contains("Cannot find device") || error.contains("No such device")
}

#[cfg(test)]
mod tests {
    use super::is_gone;

    #[test]
    fn both_of_iproutes_missing_device_errors_mean_gone() {
        assert!(is_gone(
            "`ip -n ns link delete dev veth1` failed: Cannot find device \"veth1\""
        ));
        assert!(is_gone(
            "`ip -n ns link delete dev veth1` failed: RTNETLINK answers: No such device"
        ));
        assert!(!is_gone(
            "`ip -n ns link delete dev veth1` failed: RTNETLINK answers: Operation not permitted"
        ));
    }
}
