//! Accounting on the test ground: a running cluster (cluster.yaml) gets an Accounting backed by a
//! MariaDB pod. The Controller's `accountingRef` rolls slurmctld onto slurmdbd, the cluster
//! registers itself there, and a job run afterwards is in the accounting history.

use crate::common;

use std::time::Duration;

use common::{TestEnv, ground};

const LIMIT: Duration = Duration::from_secs(300);

#[test]
fn accounting_from_an_accounting_resource_records_jobs() {
    let mut env = TestEnv::new("op-acct");
    env.start_operator(&["--slurm-poll", "1s"]);
    let g = ground();
    g.apply(
        env.name(),
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: mariadb-password\nstringData:\n  password: acct-db-pass\n",
    );
    env.apply_manifest("cluster.yaml");
    env.apply_manifest("accounting.yaml");
    env.wait_for(
        "statefulset/slurm-accounting",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "1",
    );
    // The DB password reaches slurmdbd.conf in the Accounting's Secret, nowhere else.
    let conf = g.get(
        env.name(),
        "secret/slurm-accounting",
        "{.data.slurmdbd\\.conf}",
    );
    assert!(
        !conf.is_empty(),
        "Secret slurm-accounting has no slurmdbd.conf"
    );

    g.ok(&[
        "patch",
        "-n",
        env.name(),
        "controllers.slinky.slurm.net/slurm",
        "--type=merge",
        "-p",
        r#"{"spec":{"accountingRef":{"name":"slurm"}}}"#,
    ]);
    env.wait_for(
        "configmap/slurm-config",
        "{.data.slurm\\.conf}",
        LIMIT,
        |c| {
            c.contains("AccountingStorageType=accounting_storage/slurmdbd")
                && c.contains("AccountingStorageHost=slurm-accounting")
        },
    );
    env.wait_for(
        "statefulset/slurm-controller",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "1",
    );
    env.wait_for(
        "nodeset/slurm-worker-slinky",
        "{.status.readyReplicas}",
        LIMIT,
        |r| r == "3",
    );

    // slurmctld registered the cluster in slurmdbd, and the job is in the history.
    let cluster = format!("{}_slurm", env.name());
    let (code, out) = env.run_in_cluster(
        "slurm",
        &format!(
            "for i in $(seq 60); do sacctmgr -n -P show cluster format=cluster | grep -qx '{cluster}' && break; sleep 2; done
             sacctmgr -n -P show cluster format=cluster
             sbatch --wait -N1 -J acct-probe -o /dev/null --wrap true
             for i in $(seq 30); do sacct -n -X -P -a -o jobname,state | grep -q '^acct-probe|COMPLETED' && break; sleep 2; done
             sacct -n -X -P -a -o jobname,state"
        ),
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines().any(|l| l.trim() == cluster),
        "cluster {cluster} not in slurmdbd:\n{out}"
    );
    assert!(
        out.contains("acct-probe|COMPLETED"),
        "job not in the history:\n{out}"
    );
}
