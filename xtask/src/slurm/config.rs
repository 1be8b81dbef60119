//! The configuration files of a local cluster, rendered from its shape.

use super::Release;

/// What `up` was asked for.
#[derive(Clone, Debug)]
pub struct Shape {
    pub release: Release,
    pub nodes: u32,
    pub accounting: bool,
    /// Extra nodes defined in slurm.conf with no slurmd behind them (0: none).
    pub virtual_nodes: u32,
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

/// Partition holding the virtual nodes.
pub const VIRTUAL_PARTITION: &str = "virtual";
/// Room for the tens of thousands of jobs a scale benchmark submits (the default is 10,000).
pub const MAX_JOBS_WITH_VIRTUAL_NODES: u32 = 100_000;

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
    if shape.virtual_nodes > 0 {
        conf.push_str(&format!("MaxJobCount={MAX_JOBS_WITH_VIRTUAL_NODES}\n"));
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
    if shape.virtual_nodes == 0 {
        conf.push_str("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
        return conf;
    }
    conf.push_str(&virtual_nodes(shape.virtual_nodes));
    conf.push_str(&format!(
        "PartitionName=debug Nodes=node[1-{}] Default=YES MaxTime=INFINITE State=UP\n\
         PartitionName={VIRTUAL_PARTITION} Nodes=vnode[1-{}] MaxTime=INFINITE State=UP\n",
        shape.nodes, shape.virtual_nodes
    ));
    conf
}

/// `vnode1…vnodeN`: shaped like the real nodes, but no slurmd serves them. As powered-down
/// cloud nodes (`idle~`) slurmctld lists them at once and never pings them; DOWN ones would be
/// pinged every few seconds (a flood of "Abandon tree forward" errors, measured). They share an
/// address and a port nothing listens on inside the namespace. No job starts on them: there is
/// no ResumeProgram, so submit held jobs there.
fn virtual_nodes(count: u32) -> String {
    format!(
        "NodeName=vnode[1-{count}] NodeAddr={VIRTUAL_NODE_ADDR} Port={VIRTUAL_NODE_PORT} \
         CPUs={CPUS_PER_NODE} RealMemory={MEMORY_PER_NODE_MB} Gres=gpu:{GPUS_PER_NODE} Feature=virtual \
         State={VIRTUAL_NODE_STATE}\n"
    )
}

const VIRTUAL_NODE_ADDR: &str = "127.0.0.2";
const VIRTUAL_NODE_PORT: u16 = 9;
const VIRTUAL_NODE_STATE: &str = "CLOUD";

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

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(virtual_nodes: u32) -> Shape {
        Shape {
            release: Release::R26_05,
            nodes: 4,
            accounting: false,
            virtual_nodes,
        }
    }

    #[test]
    fn virtual_nodes_get_their_own_partition_and_room_for_jobs() {
        let plain = slurm_conf(&shape(0));
        assert!(plain.contains("PartitionName=debug Nodes=ALL Default=YES"));
        assert!(!plain.contains("vnode") && !plain.contains("MaxJobCount"));

        let big = slurm_conf(&shape(2000));
        assert!(big.contains("NodeName=vnode[1-2000] "), "{big}");
        assert!(big.contains("PartitionName=debug Nodes=node[1-4] Default=YES"));
        assert!(big.contains("PartitionName=virtual Nodes=vnode[1-2000] "));
        assert!(big.contains("MaxJobCount=100000\n"));
    }
}
