//! `cargo xtask image --verify`: loads the archives into podman and runs each image's entrypoint for real —
//! the toolbox's pause, MariaDB's initialisation, and per Slurm release a whole cluster in one pod
//! (MariaDB, slurmdbd, slurmctld, a dynamic slurmd, slurmrestd, a login node) that runs a job; and the
//! project images' binaries.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::podman::Podman;
use super::recipes::Recipe;
use crate::slurm::Release;

const DB_PASSWORD: &str = "verify-db";

pub fn verify(recipes: &[Recipe], archives: &Path, work: &Path) -> Result<()> {
    let podman = Podman::new(&work.join("podman"))?;
    for recipe in recipes {
        let archive = archives.join(format!("{}.oci.tar", recipe.id));
        let out = podman.run(&["load", "-i", archive.to_str().context("non-UTF-8 path")?])?;
        println!("{}: {}", recipe.id, out.trim());
        for alias in &recipe.names[1..] {
            podman.run(&["tag", &recipe.names[0], alias])?;
        }
    }
    // Earlier builds' images lose their names to these; keep the private storage from growing.
    podman.run(&["image", "prune", "-f"])?;
    let has = |id: &str| recipes.iter().any(|r| r.id == id);
    if has("toolbox") {
        toolbox(&podman)?;
    }
    if has("mariadb") {
        mariadb(&podman)?;
    }
    for release in Release::ALL {
        let ids = ["slurmctld", "slurmd", "slurmrestd", "slurmdbd", "login"]
            .map(|c| format!("{c}-{release}"));
        if ids.iter().any(|id| has(id)) {
            let missing: Vec<_> = ids.iter().filter(|id| !has(id)).cloned().collect();
            if !missing.is_empty() || !has("mariadb") || !has("toolbox") {
                bail!(
                    "verifying Slurm {release} images runs a whole cluster: also select {} (or use --all)",
                    [missing, vec!["mariadb".into(), "toolbox".into()]]
                        .concat()
                        .join(", ")
                );
            }
            cluster(&podman, release, work)?;
        }
    }
    Ok(())
}

/// Each project image: loads its archive, checks it runs as `nonroot`, and runs its binary's `--help`
/// (the binary is all there is: no shell to run anything else with).
pub fn project(built: &[&super::build::Built], work: &Path) -> Result<()> {
    if built.is_empty() {
        return Ok(());
    }
    let podman = Podman::new(&work.join("podman"))?;
    for image in built {
        let archive = image.archive.to_str().context("non-UTF-8 path")?;
        podman.run(&["load", "-i", archive])?;
        for alias in &image.names[1..] {
            podman.run(&["tag", &image.names[0], alias])?;
        }
        let user = podman.run(&[
            "image",
            "inspect",
            "-f",
            "{{.Config.User}}",
            &image.names[0],
        ])?;
        if user.trim() != "65532:65532" {
            bail!(
                "{} runs as {:?}, not 65532:65532",
                image.names[0],
                user.trim()
            );
        }
        let help = podman.run(&["run", "--rm", &image.names[0], "--help"])?;
        println!(
            "{}: {} ({})",
            image.id,
            help.lines().next().unwrap_or_default(),
            image.names[0]
        );
    }
    podman.run(&["image", "prune", "-f"])?;
    Ok(())
}

fn toolbox(podman: &Podman) -> Result<()> {
    let out = podman.run(&[
        "run",
        "--rm",
        "docker.io/library/alpine:latest",
        "sh",
        "-c",
        "busybox | head -n1; for a in sh sleep nc wget mkfifo cat; do command -v $a; done | tr '\\n' ' '",
    ])?;
    println!("toolbox: {}", out.trim().replace('\n', " | "));
    let _ = podman.try_run(&["rm", "-f", "verify-pause"]);
    podman.run(&[
        "run",
        "-d",
        "--name",
        "verify-pause",
        "localhost/slurm-dev/toolbox:latest",
    ])?;
    let started = Instant::now();
    podman.run(&["stop", "-t", "10", "verify-pause"])?;
    let code = podman.run(&["inspect", "-f", "{{.State.ExitCode}}", "verify-pause"])?;
    let stopped = started.elapsed();
    podman.run(&["rm", "-f", "verify-pause"])?;
    if code.trim() != "0" || stopped.as_secs() >= 5 {
        bail!(
            "toolbox's pause did not stop at once with status 0 (status {}, {stopped:.1?})",
            code.trim()
        );
    }
    println!("toolbox: pause stopped on SIGTERM in {stopped:.1?} with status 0");
    Ok(())
}

fn mariadb(podman: &Podman) -> Result<()> {
    let _ = podman.try_run(&["rm", "-f", "verify-mariadb"]);
    podman.run(&[
        "run",
        "-d",
        "--name",
        "verify-mariadb",
        "-e",
        "MARIADB_ROOT_PASSWORD=root-pw",
        "-e",
        "MARIADB_DATABASE=slurm_acct_db",
        "-e",
        "MARIADB_USER=slurm",
        "-e",
        &format!("MARIADB_PASSWORD={DB_PASSWORD}"),
        "docker.io/library/mariadb:11.8",
    ])?;
    let out = podman
        .wait_for(
            "MariaDB to accept its user over TCP",
            90,
            &[
                "exec",
                "verify-mariadb",
                "mariadb",
                "-h127.0.0.1",
                "-uslurm",
                &format!("-p{DB_PASSWORD}"),
                "slurm_acct_db",
                "-Nse",
                "SELECT CONCAT(CURRENT_USER(), ' ', VERSION(), ' ', DATABASE())",
            ],
            |o| o.contains("slurm@"),
        )
        .map_err(|e| e.context(podman.logs("verify-mariadb")))?;
    println!("mariadb: {}", out.trim());
    podman.run(&["rm", "-f", "-t", "5", "verify-mariadb"])?;
    Ok(())
}

fn cluster(podman: &Podman, release: Release, work: &Path) -> Result<()> {
    let pod = format!("slurm-verify-{}", release.slug());
    let host = format!("verify{}", release.slug());
    let _ = podman.try_run(&["pod", "rm", "-f", &pod]);
    let etc = work.join(format!("etc-{}", release.slug()));
    let dirs = write_config(&etc, &host)?;
    podman.run(&["pod", "create", "--name", &pod, "--hostname", &host])?;
    let result = run_cluster(podman, release, &pod, &host, &dirs);
    if result.is_err() {
        for c in [
            "mariadb",
            "slurmdbd",
            "slurmctld",
            "slurmd",
            "slurmrestd",
            "login",
        ] {
            eprintln!("--- {c} ---\n{}", podman.logs(&format!("{pod}-{c}")));
        }
    }
    let _ = podman.try_run(&["pod", "rm", "-f", "-t", "5", &pod]);
    result
}

struct ConfigDirs {
    slurm: String,
    root: String,
    nobody: String,
    sshd_config: String,
}

/// The cluster's /etc/slurm as the operator mounts it: everything for slurmctld and slurmdbd (owned by
/// SlurmUser), slurm.conf + slurm.key for slurmrestd (its user), slurm.key alone for slurmd and sackd.
fn write_config(etc: &Path, host: &str) -> Result<ConfigDirs> {
    let _ = std::fs::remove_dir_all(etc);
    let key: String = (0..64)
        .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
        .collect();
    let jwt: String = (0..64)
        .map(|i| char::from(b'A' + (i * 11 % 26) as u8))
        .collect();
    let slurm_conf = format!(
        "ClusterName=verify\nSlurmctldHost={host}\nSlurmUser=slurm\nSlurmdUser=root\n\
         AuthType=auth/slurm\nCredType=cred/slurm\nAuthAltTypes=auth/jwt\n\
         AuthAltParameters=jwt_key=/etc/slurm/jwt.key\nSlurmctldParameters=enable_configless\n\
         StateSaveLocation=/var/spool/slurmctld\nSlurmdSpoolDir=/var/spool/slurmd\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
         MpiDefault=none\nSelectType=select/cons_tres\nReturnToService=2\nMaxNodeCount=8\n\
         AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost={host}\n\
         NodeSet=verify Feature=verify\n\
         PartitionName=debug Nodes=verify Default=YES MaxTime=INFINITE State=UP\n"
    );
    let dbd_conf = format!(
        "DbdHost={host}\nDbdPort=6819\nSlurmUser=slurm\nAuthType=auth/slurm\nAuthAltTypes=auth/jwt\n\
         AuthAltParameters=jwt_key=/etc/slurm/jwt.key\nStorageType=accounting_storage/mysql\n\
         StorageHost=127.0.0.1\nStoragePort=3306\nStorageUser=slurm\nStoragePass={DB_PASSWORD}\n\
         StorageLoc=slurm_acct_db\nPidFile=/run/slurmdbd/slurmdbd.pid\n"
    );
    let write = |dir: &str, owner: u32, files: &[(&str, &str)]| -> Result<String> {
        let dir = etc.join(dir);
        std::fs::create_dir_all(&dir)?;
        for (name, content) in files {
            let path = dir.join(name);
            std::fs::write(&path, content)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            std::os::unix::fs::chown(&path, Some(owner), Some(owner))?;
        }
        Ok(dir.to_str().context("non-UTF-8 path")?.to_owned())
    };
    let cgroup = "CgroupPlugin=disabled\n";
    Ok(ConfigDirs {
        slurm: write(
            "slurm",
            401,
            &[
                ("slurm.conf", &slurm_conf),
                ("cgroup.conf", cgroup),
                ("slurmdbd.conf", &dbd_conf),
                ("slurm.key", &key),
                ("jwt.key", &jwt),
            ],
        )?,
        root: write("root", 0, &[("slurm.key", &key)])?,
        nobody: write(
            "nobody",
            65534,
            &[("slurm.conf", &slurm_conf), ("slurm.key", &key)],
        )?,
        sshd_config: {
            let path = etc.join("sshd_config");
            std::fs::write(&path, "Include /etc/ssh/sshd_config.d/*.conf\nUsePAM yes\n")?;
            path.to_str().context("non-UTF-8 path")?.to_owned()
        },
    })
}

fn run_cluster(
    podman: &Podman,
    release: Release,
    pod: &str,
    host: &str,
    dirs: &ConfigDirs,
) -> Result<()> {
    let started = Instant::now();
    let name = |c: &str| format!("{pod}-{c}");
    let image = |c: &str| format!("localhost/slurm-dev/{c}:{release}");
    let slinky = |c: &str| {
        let tag = match release {
            Release::R24_11 => "24.11-ubuntu24.04",
            Release::R26_05 => "26.05-ubuntu26.04",
        };
        format!("ghcr.io/slinkyproject/{c}:{tag}")
    };
    let etc = |dir: &str| format!("{dir}:/etc/slurm:ro");
    let conf_server = format!("{host}:6817");

    podman.run(&[
        "run",
        "-d",
        "--pod",
        pod,
        "--name",
        &name("mariadb"),
        "-e",
        "MARIADB_ROOT_PASSWORD=root-pw",
        "-e",
        "MARIADB_DATABASE=slurm_acct_db",
        "-e",
        "MARIADB_USER=slurm",
        "-e",
        &format!("MARIADB_PASSWORD={DB_PASSWORD}"),
        "localhost/slurm-dev/mariadb:latest",
    ])?;
    podman.wait_for(
        "MariaDB",
        90,
        &[
            "exec",
            &name("mariadb"),
            "mariadb",
            "-h127.0.0.1",
            "-uslurm",
            &format!("-p{DB_PASSWORD}"),
            "-e",
            "SELECT 1",
        ],
        |_| true,
    )?;
    // As Slinky's operator runs them: slurmdbd and slurmctld as SlurmUser 401, slurmrestd as 65534.
    podman.run(&[
        "run",
        "-d",
        "--pod",
        pod,
        "--name",
        &name("slurmdbd"),
        "--user",
        "401:401",
        "-v",
        &etc(&dirs.slurm),
        &slinky("slurmdbd"),
    ])?;
    podman.run(&[
        "run",
        "-d",
        "--pod",
        pod,
        "--name",
        &name("slurmctld"),
        "--user",
        "401:401",
        "-v",
        &etc(&dirs.slurm),
        &slinky("slurmctld"),
    ])?;
    let ping = podman.wait_for(
        "slurmctld to answer",
        60,
        &["exec", &name("slurmctld"), "scontrol", "ping"],
        |o| o.contains("UP"),
    )?;
    println!("slurm {release}: scontrol ping: {}", ping.trim());
    // The operator's slurmd arguments, its --conf value quoted for the entrypoint's shell.
    podman.run(&[
        "run",
        "-d",
        "--pod",
        pod,
        "--name",
        &name("slurmd"),
        "--privileged",
        "-v",
        &etc(&dirs.root),
        // As a NodeSet with ssh enabled, on another port than the login container's sshd in this pod.
        "-v",
        &format!("{}:/etc/ssh/sshd_config:ro", dirs.sshd_config),
        "-e",
        "SSHD_OPTIONS=-p 2222",
        &slinky("slurmd"),
        "-Z",
        "--conf-server",
        &conf_server,
        "--conf",
        "'Features=verify'",
    ])?;
    let nodes = podman.wait_for(
        "the dynamic node to register",
        60,
        &[
            "exec",
            &name("slurmctld"),
            "sinfo",
            "-h",
            "-N",
            "-o",
            "%N %T %f %P",
        ],
        |o| o.contains("idle"),
    )?;
    println!("slurm {release}: sinfo: {}", nodes.trim());
    podman.run(&[
        "run",
        "-d",
        "--pod",
        pod,
        "--name",
        &name("slurmrestd"),
        "--user",
        "65534:65534",
        "-e",
        "SLURM_JWT=daemon",
        "-e",
        "SLURMRESTD_SECURITY=disable_unshare_files,disable_unshare_sysv",
        "-v",
        &etc(&dirs.nobody),
        &image("slurmrestd"),
        "0.0.0.0:6820",
    ])?;
    podman.run(&[
        "run",
        "-d",
        "--pod",
        pod,
        "--name",
        &name("login"),
        "-e",
        &format!("SACKD_OPTIONS=--conf-server {conf_server}"),
        "-v",
        &etc(&dirs.root),
        &image("login"),
    ])?;
    podman.wait_for(
        "sackd's socket in the login container",
        60,
        &[
            "exec",
            &name("login"),
            "test",
            "-S",
            "/run/slurm/sack.socket",
        ],
        |_| true,
    )?;
    let job = podman.run(&[
        "exec",
        &name("login"),
        "sbatch",
        "--parsable",
        "--wrap",
        "hostname; id -un",
    ])?;
    let job = job.trim().to_owned();
    println!("slurm {release}: sbatch from the login container: job {job}");
    podman
        .wait_for(
            "the job to complete in accounting",
            60,
            &[
                "exec",
                &name("login"),
                "sacct",
                "-n",
                "-X",
                "-j",
                &job,
                "-o",
                "JobID,State,NodeList",
            ],
            |o| o.contains("COMPLETED"),
        )
        .map(|o| println!("slurm {release}: sacct: {}", o.trim()))?;
    let banner = podman.run(&[
        "run",
        "--rm",
        "--pod",
        pod,
        "localhost/slurm-dev/toolbox:latest",
        "sh",
        "-c",
        "echo | nc 127.0.0.1 22 | head -n1",
    ])?;
    println!("slurm {release}: login sshd banner: {}", banner.trim());
    let banner = podman.wait_for(
        "sshd in the slurmd container",
        20,
        &[
            "run",
            "--rm",
            "--pod",
            pod,
            "localhost/slurm-dev/toolbox:latest",
            "sh",
            "-c",
            "echo | nc 127.0.0.1 2222 | head -n1",
        ],
        |o| o.starts_with("SSH-"),
    )?;
    println!("slurm {release}: slurmd's sshd banner: {}", banner.trim());

    let token = podman.run(&[
        "exec",
        &name("slurmctld"),
        "scontrol",
        "token",
        "username=slurm",
        "lifespan=600",
    ])?;
    let token = token
        .trim()
        .strip_prefix("SLURM_JWT=")
        .context("scontrol token printed no token")?
        .to_owned();
    let url = "http://127.0.0.1:6820/slurm/v0.0.42/diag";
    let diag = podman.wait_for(
        "slurmrestd to answer",
        30,
        &[
            "run",
            "--rm",
            "--pod",
            pod,
            "localhost/slurm-dev/toolbox:latest",
            "wget",
            "-qO-",
            "--header",
            "X-SLURM-USER-NAME: slurm",
            "--header",
            &format!("X-SLURM-USER-TOKEN: {token}"),
            url,
        ],
        |o| o.contains("\"statistics\""),
    )?;
    let version = diag
        .split("\"release\":")
        .nth(1)
        .and_then(|s| s.split('"').nth(1))
        .unwrap_or("?");
    println!(
        "slurm {release}: GET {url} via slurmrestd: {} bytes, Slurm release {version}",
        diag.len()
    );
    println!(
        "slurm {release}: whole cluster verified in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
