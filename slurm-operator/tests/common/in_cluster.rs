//! Slurm's client commands run from inside the cluster: a short-lived pod from the login image
//! with a configless sackd (as on a Slinky login node) that fetches slurm.conf from slurmctld,
//! authenticates with the cluster's slurm.key, and then runs the test's command.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::ground;

const IMAGE: &str = "ghcr.io/slinkyproject/login:26.05-ubuntu26.04";
/// Enough for a command that waits for nodes or for a job (`sbatch --wait`).
const LIMIT: Duration = Duration::from_secs(600);

/// Exits 97 when sackd got no configuration: then slurmctld was not reachable or refused the key.
const PRELUDE: &str = r#"mkdir -p /run/slurm
sackd --disable-reconfig --conf-server "$CONF_SERVER"
i=0
until [ -S /run/slurm/sack.socket ] && [ -f /run/slurm/conf/slurm.conf ]; do
  i=$((i + 1))
  if [ "$i" -gt 120 ]; then echo "run_in_cluster: sackd got no config from $CONF_SERVER" >&2; exit 97; fi
  sleep 0.5
done
"#;

/// Runs `command` (a `sh` script) in a pod of namespace `ns` that talks to the Slurm cluster of
/// Controller `controller` (`<controller>-controller.<ns>:6817`, the key from its `slurmKeyRef`);
/// returns its exit code and its output (stdout and stderr). Panics when the pod does not finish
/// within ten minutes.
pub fn run_in_cluster(ns: &str, controller: &str, command: &str) -> (i32, String) {
    let g = ground();
    let cr = format!("controllers.slinky.slurm.net/{controller}");
    let key_secret = g.get(ns, &cr, "{.spec.slurmKeyRef.name}");
    let key_name = g.get(ns, &cr, "{.spec.slurmKeyRef.key}");
    assert!(
        !key_secret.is_empty() && !key_name.is_empty(),
        "Controller {ns}/{controller} has no slurmKeyRef (or does not exist)"
    );
    run_with_key(
        ns,
        &format!("{controller}-controller.{ns}:6817"),
        &format!("slurm-workers-{controller}.{ns}.svc.cluster.local"),
        (&key_secret, &key_name),
        command,
    )
}

/// [`run_in_cluster`] with everything spelled out: slurmctld at `conf_server`, the DNS search
/// domain of the workers' Service (so that `srun` reaches nodes by name), the Secret and key
/// holding slurm.key.
pub fn run_with_key(
    ns: &str,
    conf_server: &str,
    workers_domain: &str,
    (key_secret, key_name): (&str, &str),
    command: &str,
) -> (i32, String) {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let g = ground();
    let pod = format!(
        "slurm-client-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let spec = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "labels": {"app.kubernetes.io/name": "slurm-test-client"}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "dnsConfig": {"searches": [workers_domain]},
            "containers": [{
                "name": "client",
                "image": IMAGE,
                "command": ["sh", "-c", format!("{PRELUDE}{command}")],
                "env": [{"name": "CONF_SERVER", "value": conf_server}],
                "volumeMounts": [{"name": "slurm-etc", "mountPath": "/etc/slurm"}],
            }],
            "volumes": [{
                "name": "slurm-etc",
                "projected": {
                    "defaultMode": 0o600,
                    "sources": [{"secret": {
                        "name": key_secret,
                        "items": [{"key": key_name, "path": "slurm.key"}],
                    }}],
                },
            }],
        },
    });
    g.apply(ns, &spec.to_string());
    let what = format!("pod/{pod}");
    let deadline = Instant::now() + LIMIT;
    loop {
        let phase = g.get(ns, &what, "{.status.phase}");
        if phase == "Succeeded" || phase == "Failed" {
            break;
        }
        if Instant::now() > deadline {
            let output = g.log(ns, &pod, "client");
            let _ = g.kubectl(&["delete", "-n", ns, &what, "--wait=false"], None);
            panic!("{ns}/{pod} still {phase:?} after {LIMIT:?}; output so far:\n{output}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let code = g.get(
        ns,
        &what,
        "{.status.containerStatuses[0].state.terminated.exitCode}",
    );
    let output = g.log(ns, &pod, "client");
    let _ = g.kubectl(&["delete", "-n", ns, &what, "--wait=false"], None);
    let code = code
        .parse()
        .unwrap_or_else(|_| panic!("{ns}/{pod}: no exit code ({code:?}); output:\n{output}"));
    (code, output)
}
