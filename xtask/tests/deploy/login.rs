//! Logging in to the `slurm` chart's login pod over ssh, as a user does: root's key given in
//! `loginsets.<key>.rootSshAuthorizedKeys`, the host key checked against the Secret the operator
//! made (`N-ssh-host-keys`), then Slurm's commands from the login shell.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use test_support::ground::Ground;

/// The LoginSet the chart makes from `loginsets.login` (`<release>-login-<key>`).
const LOGINSET: &str = "slurm-login-login";

/// An ssh key pair in a directory of this run, and a values file that authorizes it.
pub struct Keys {
    dir: PathBuf,
}

impl Keys {
    pub fn new() -> Keys {
        let dir = std::env::temp_dir().join(format!("slurm-e2e-ssh-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory for the ssh keys");
        for name in ["user", "stranger"] {
            keygen(&dir.join(name));
        }
        let public = std::fs::read_to_string(dir.join("user.pub")).expect("user.pub");
        let values = format!(
            "loginsets:\n  login:\n    rootSshAuthorizedKeys: {:?}\n",
            public.trim()
        );
        std::fs::write(dir.join("values.yaml"), values).expect("values.yaml");
        Keys { dir }
    }

    /// Helm arguments that add the authorized key.
    pub fn values(&self) -> Vec<String> {
        vec![
            "-f".into(),
            self.dir.join("values.yaml").display().to_string(),
        ]
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "e2e", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen (openssh-client)");
    assert!(out.status.success(), "ssh-keygen: {out:?}");
}

/// ssh to the login Service as root with key `key`, checking the host key against the
/// operator's Secret; returns whether it succeeded and what it printed.
fn ssh(g: &Ground, ns: &str, keys: &Keys, key: &str, command: &str) -> (bool, String) {
    let ip = g.get(ns, &format!("service/{LOGINSET}"), "{.spec.clusterIP}");
    let host_key = g.ok(&[
        "get",
        "secret",
        "-n",
        ns,
        &format!("{LOGINSET}-ssh-host-keys"),
        "-o",
        "go-template={{index .data \"ssh_host_ed25519_key.pub\" | base64decode}}",
    ]);
    let mut fields = host_key.split_whitespace();
    let (kind, body) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
    let known_hosts = keys.dir.join("known_hosts");
    std::fs::write(&known_hosts, format!("{ip} {kind} {body}\n")).expect("known_hosts");
    let key_path = keys.dir.join(key).display().to_string();
    let known = format!("UserKnownHostsFile={}", known_hosts.display());
    let target = format!("root@{ip}");
    let mut p = g.spawn_inside(
        "ssh",
        &[
            "-i",
            &key_path,
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            &known,
            "-o",
            "ConnectTimeout=10",
            &target,
            command,
        ],
        &[],
    );
    let status = p.wait(Duration::from_secs(120));
    (status.success(), p.log())
}

/// Root logs in with the authorized key and runs `sinfo` and a two-node `srun`; a key that is
/// not authorized is refused.
pub fn login_runs_slurm_commands(g: &Ground, ns: &str, keys: &Keys, workers: &[&str]) {
    let (ok, out) = ssh(
        g,
        ns,
        keys,
        "user",
        "sinfo -h -o '%P %D %t' && srun -p workers -N2 hostname",
    );
    assert!(ok, "ssh root@login with the authorized key:\n{out}");
    for worker in workers {
        assert!(
            out.lines().any(|l| l.trim() == *worker),
            "srun -N2 hostname did not run on {worker}:\n{out}"
        );
    }
    let (ok, out) = ssh(g, ns, keys, "stranger", "true");
    assert!(!ok, "a key not in rootSshAuthorizedKeys logged in:\n{out}");
    assert!(out.contains("Permission denied"), "{out}");
}
