//! LoginSet on the test ground: a LoginSet next to a Controller gets Slinky's children — the
//! Deployment and Service `N`, the ConfigMap `N-ssh-config` and the immutable Secret
//! `N-ssh-host-keys` with the six OpenSSH key files — and its status carries the scale
//! subresource's selector. The host keys are made once: a second reconcile keeps them. No Slurm
//! daemon or sshd needs to run for this.

use crate::common;

use std::time::Duration;

use common::{TestEnv, ground};

const LIMIT: Duration = Duration::from_secs(60);
const LOGIN: &str = "slurm-login-slinky";

const MANIFEST: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: slurm-login-sssd
stringData:
  sssd.conf: |
    [sssd]
    services = nss,pam
---
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata:
  name: slurm
spec:
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}
---
apiVersion: slinky.slurm.net/v1beta1
kind: LoginSet
metadata:
  name: slurm-login-slinky
spec:
  controllerRef: {name: slurm}
  replicas: 1
  sssdConfRef: {name: slurm-login-sssd, key: sssd.conf}
  rootSshAuthorizedKeys: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2v test@example"
  login:
    image: ghcr.io/slinkyproject/login:26.05-ubuntu26.04
"#;

#[test]
fn loginset_children_with_slinky_names() {
    let mut env = TestEnv::new("op-login");
    env.start_operator(&[]);
    ground().apply(env.name(), MANIFEST);

    let keys = env.wait_for(
        &format!("secret/{LOGIN}-ssh-host-keys"),
        "{.data}",
        LIMIT,
        |d| d.contains("ssh_host_ed25519_key"),
    );
    for file in [
        "ssh_host_rsa_key",
        "ssh_host_rsa_key.pub",
        "ssh_host_ed25519_key",
        "ssh_host_ed25519_key.pub",
        "ssh_host_ecdsa_key",
        "ssh_host_ecdsa_key.pub",
    ] {
        assert!(keys.contains(&format!("\"{file}\"")), "{file} missing");
    }
    let g = ground();
    let ns = env.name().to_owned();
    let get = |what: &str, path: &str| g.get(&ns, what, path);
    assert_eq!(
        get(&format!("secret/{LOGIN}-ssh-host-keys"), "{.immutable}"),
        "true"
    );
    env.wait_for(
        &format!("deployment/{LOGIN}"),
        "{.metadata.name}",
        LIMIT,
        |n| n == LOGIN,
    );
    assert_eq!(
        get(&format!("service/{LOGIN}"), "{.spec.ports[0].port}"),
        "22"
    );
    assert!(
        get(
            &format!("configmap/{LOGIN}-ssh-config"),
            "{.data.authorized_keys}"
        )
        .contains("test@example")
    );
    let projected = get(
        &format!("deployment/{LOGIN}"),
        "{.spec.template.spec.volumes[*].projected.sources[*].secret.name}",
    );
    assert!(
        projected.contains(&format!("{LOGIN}-ssh-host-keys")),
        "{projected}"
    );
    let selector = env.wait_for(
        &format!("loginset/{LOGIN}"),
        "{.status.selector}",
        LIMIT,
        |s| !s.is_empty(),
    );
    assert!(
        selector.contains(&format!("app.kubernetes.io/instance={LOGIN}")),
        "{selector}"
    );

    // A restarted operator keeps the keys it made.
    let before = get(
        &format!("secret/{LOGIN}-ssh-host-keys"),
        "{.metadata.uid} {.data.ssh_host_ed25519_key\\.pub}",
    );
    env.start_operator(&[]);
    g.ok(&[
        "annotate",
        "-n",
        &ns,
        &format!("loginset/{LOGIN}"),
        "test/poke=1",
    ]);
    env.wait_for(
        &format!("deployment/{LOGIN}"),
        "{.metadata.name}",
        LIMIT,
        |n| n == LOGIN,
    );
    std::thread::sleep(Duration::from_secs(3));
    let after = get(
        &format!("secret/{LOGIN}-ssh-host-keys"),
        "{.metadata.uid} {.data.ssh_host_ed25519_key\\.pub}",
    );
    assert_eq!(before, after, "host keys were rewritten");
}
