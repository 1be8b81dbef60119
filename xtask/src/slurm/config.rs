//! The configuration files of a local cluster, rendered from its shape.

use super::Release;

/// What `up` was asked for.
#[derive(Clone, Debug)]
pub struct Shape {
    pub release: Release,
    pub nodes: u32,
    pub accounting: bool,
}

pub const CPUS_PER_NODE: u32 = 4;
pub const MEMORY_PER_NODE_MB: u32 = 4096;
pub const GPUS_PER_NODE: u32 = 2;
pub const CTL_HOST: &str = "ctl";
pub const FAKE_GPU_DIR: &str = "/var/lib/slurm-dev/gpus";

/// Loopback address of node `n` (1-based) inside the cluster's network namespace.
pub fn node_addr(n: u32) -> String {
    format!("127.0.0.{}", 10 + n)
}

pub fn node_name(n: u32) -> String {
    format!("node{n}")
}

pub fn cluster_name(release: Release) -> String {
    format!("dev{}", release.slug())
}

pub fn slurm_conf(shape: &Shape) -> String {
    let mut conf = format!(
        "\
ClusterName={cluster}
SlurmctldHost={CTL_HOST}(127.0.0.1)
SlurmUser=slurm
AuthType=auth/slurm
CredType=cred/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=300
GresTypes=gpu
Licenses=matlab:10,fluent:4
",
        cluster = cluster_name(shape.release),
    );
    if shape.accounting {
        conf.push_str(&format!(
            "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost={CTL_HOST}\n\
             AccountingStorageTRES=gres/gpu\n"
        ));
    }
    for n in 1..=shape.nodes {
        conf.push_str(&format!(
            "NodeName={name} NodeHostname={name} NodeAddr={addr} Port={port} CPUs={CPUS_PER_NODE} \
             RealMemory={MEMORY_PER_NODE_MB} Gres=gpu:{GPUS_PER_NODE} Feature=f{parity} State=UNKNOWN\n",
            name = node_name(n),
            addr = node_addr(n),
            port = 6830 + n,
            parity = if n % 2 == 0 { "even" } else { "odd" },
        ));
    }
    conf.push_str("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
    conf
}

pub fn gres_conf() -> String {
    // slurmd ignores a GPU without a device file; plain files stand in for the devices.
    format!(
        "AutoDetect=off\nName=gpu File={FAKE_GPU_DIR}/gpu[0-{}]\n",
        GPUS_PER_NODE - 1
    )
}

pub fn cgroup_conf() -> &'static str {
    "CgroupPlugin=disabled\n"
}

pub const DB_PASSWORD: &str = "slurmdev";

pub fn slurmdbd_conf() -> String {
    format!(
        "\
AuthType=auth/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key
DbdHost={CTL_HOST}
DbdAddr=127.0.0.1
SlurmUser=slurm
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass={DB_PASSWORD}
StorageLoc=slurm_acct_db
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd/slurmdbd.pid
DebugLevel=info
"
    )
}

pub fn hosts(shape: &Shape) -> String {
    let mut hosts = format!("127.0.0.1 localhost {CTL_HOST}\n");
    for n in 1..=shape.nodes {
        hosts.push_str(&format!("{} {}\n", node_addr(n), node_name(n)));
    }
    hosts
}
