//! Bringing a cluster up and down: the order daemons start in and what each waits for.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::config::{self, Shape};
use super::process::{self, Inside};
use super::rootfs::{self, REST_USER, TEST_USER};
use super::state::{self, Daemon, State};
use super::{Release, netns};

const START_TIMEOUT: Duration = Duration::from_secs(90);

pub fn netns_name(release: Release) -> String {
    format!("slurm-dev-{}", release.slug())
}

/// Whether a cluster of `release` has live processes.
pub fn running(release: Release) -> Result<Option<State>> {
    Ok(State::load(release)?.filter(|s| s.daemons.iter().any(|d| process::is_running(d.pid))))
}

pub fn up(shape: &Shape, port: u16) -> Result<State> {
    let release = shape.release;
    if let Some(state) = running(release)? {
        bail!(
            "a Slurm {release} cluster is already running (slurmrestd on 127.0.0.1:{}); \
             stop it first with `cargo xtask slurm down --release {release}`",
            state.port
        );
    }
    let root = rootfs::ensure(release)?;
    // Leftovers of a crashed run (namespace, strays) must not leak into the new cluster.
    down(release)?;
    TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
        anyhow::anyhow!("port 127.0.0.1:{port} is taken ({e}); choose another with --port")
    })?;

    let mut state = State {
        release,
        root: root.clone(),
        netns: netns_name(release),
        port,
        nodes: shape.nodes,
        virtual_nodes: shape.virtual_nodes,
        accounting: shape.accounting,
        daemons: Vec::new(),
    };
    state.save(release)?;
    let started = Instant::now();
    match start(shape, &mut state) {
        Ok(()) => {
            eprintln!("Slurm {release} cluster up in {:.1?}", started.elapsed());
            Ok(state)
        }
        Err(e) => {
            let _ = down(release);
            Err(e.context(format!(
                "starting the Slurm {release} cluster failed (stopped again; logs in {})",
                state.log_dir().display()
            )))
        }
    }
}

fn start(shape: &Shape, state: &mut State) -> Result<()> {
    let root = state.root.clone();
    let addrs: Vec<String> = (1..=shape.nodes).map(config::node_addr).collect();
    netns::create(&state.netns, &addrs)?;
    reset(&root, shape)?;
    let logs = state.log_dir();

    if shape.accounting {
        start_database(state)?;
        spawn(
            state,
            "slurmdbd",
            config::CTL_HOST,
            false,
            None,
            &["slurmdbd", "-D"],
        )?;
        netns::wait_listening(
            &state.netns,
            netns::probe_addr(6819),
            "slurmdbd",
            &logs.join("slurmdbd.log"),
            START_TIMEOUT,
        )?;
    }
    spawn(
        state,
        "slurmctld",
        config::CTL_HOST,
        false,
        None,
        &["slurmctld", "-D", "-i"],
    )?;
    netns::wait_listening(
        &state.netns,
        netns::probe_addr(6817),
        "slurmctld",
        &logs.join("slurmctld.log"),
        START_TIMEOUT,
    )?;
    for n in 1..=shape.nodes {
        let name = config::node_name(n);
        spawn(
            state,
            &name.clone(),
            &name,
            true,
            None,
            &["slurmd", "-D", "-N", &name],
        )?;
    }
    let plugins = if shape.accounting {
        "openapi/slurmctld,openapi/slurmdbd"
    } else {
        "openapi/slurmctld"
    };
    spawn(
        state,
        "slurmrestd",
        config::CTL_HOST,
        false,
        Some(REST_USER),
        &[
            "SLURM_JWT=daemon",
            "slurmrestd",
            "-a",
            "rest_auth/jwt",
            "-s",
            plugins,
            "unix:/run/slurmrestd/slurmrestd.socket",
        ],
    )?;
    start_proxy(state)?;
    state.save(shape.release)?;

    let token = mint_token(state, "root")?;
    wait_rest(state, &token)?;
    wait_nodes_idle(state)?;
    if shape.accounting {
        seed_accounting(state)?;
    }
    let user_token = mint_token(state, TEST_USER)?;
    write_env(state, &token, &user_token)
}

/// Fresh state for every `up`: configuration, keys, spool and logs.
fn reset(root: &Path, shape: &Shape) -> Result<()> {
    let slurm = uid_of(root, "slurm")?;
    let rest = uid_of(root, REST_USER)?;
    for dir in [
        "var/spool/slurmctld",
        "var/spool/slurmd",
        "var/log/slurm",
        "run/slurmdbd",
        "run/slurmrestd",
        "run/slurm",
    ] {
        let path = root.join(dir);
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("clearing {}", path.display()))?;
        }
        std::fs::create_dir_all(&path)?;
    }
    for n in 1..=shape.nodes {
        std::fs::create_dir_all(root.join("var/spool/slurmd").join(config::node_name(n)))?;
    }
    for dir in ["var/spool/slurmctld", "var/log/slurm", "run/slurmdbd"] {
        chown(root.join(dir), Some(slurm), Some(slurm))?;
    }
    chown(root.join("run/slurmrestd"), Some(rest), Some(rest))?;
    let _ = std::fs::remove_file(root.join("run/slurmctld.pid"));

    let gpus = root.join(config::FAKE_GPU_DIR.trim_start_matches('/'));
    std::fs::create_dir_all(&gpus)?;
    for i in 0..config::GPUS_PER_NODE {
        std::fs::write(gpus.join(format!("gpu{i}")), "")?;
    }
    let etc = root.join("etc/slurm");
    std::fs::write(etc.join("slurm.conf"), config::slurm_conf(shape))?;
    std::fs::write(etc.join("gres.conf"), config::gres_conf())?;
    std::fs::write(etc.join("cgroup.conf"), config::cgroup_conf())?;
    std::fs::write(root.join("etc/hosts"), config::hosts(shape))?;
    write_secret(
        &etc.join("slurmdbd.conf"),
        config::slurmdbd_conf().as_bytes(),
        slurm,
    )?;
    write_secret(&etc.join("slurm.key"), &random_bytes(1024)?, slurm)?;
    write_secret(&etc.join("jwt_hs256.key"), &random_bytes(64)?, slurm)?;
    Ok(())
}

fn write_secret(path: &Path, content: &[u8], owner: u32) -> Result<()> {
    std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    chown(path, Some(owner), Some(owner))?;
    Ok(())
}

fn random_bytes(n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

fn uid_of(root: &Path, user: &str) -> Result<u32> {
    let passwd = std::fs::read_to_string(root.join("etc/passwd"))?;
    passwd
        .lines()
        .find_map(|line| {
            let mut fields = line.split(':');
            (fields.next() == Some(user)).then(|| fields.nth(1)?.parse().ok())?
        })
        .with_context(|| format!("user {user} is missing from {}/etc/passwd", root.display()))
}

fn spawn(
    state: &mut State,
    name: &str,
    hostname: &str,
    private_run: bool,
    user: Option<&str>,
    argv: &[&str],
) -> Result<u32> {
    let inside = Inside {
        netns: &state.netns,
        root: &state.root,
        hostname,
        private_run,
        user,
        argv: argv.iter().map(|s| s.to_string()).collect(),
    };
    let pid = inside.spawn(&state.log_dir().join(format!("{name}.out")))?;
    state.daemons.push(Daemon {
        name: name.to_owned(),
        pid,
    });
    state.save(state.release)?;
    Ok(pid)
}

/// Runs a command inside the cluster (as root, hostname `ctl`) and returns its standard output.
pub fn exec_capture(state: &State, user: Option<&str>, argv: &[&str]) -> Result<String> {
    let inside = Inside {
        netns: &state.netns,
        root: &state.root,
        hostname: config::CTL_HOST,
        private_run: false,
        user,
        argv: argv.iter().map(|s| s.to_string()).collect(),
    };
    let out = inside
        .command()
        .output()
        .with_context(|| format!("running {}", argv.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`{}` failed inside the Slurm {} cluster ({}): {}",
            argv.join(" "),
            state.release,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn start_database(state: &mut State) -> Result<()> {
    let root = state.root.clone();
    let datadir = root.join("var/lib/mysql");
    if datadir.exists() {
        std::fs::remove_dir_all(&datadir)?;
    }
    std::fs::create_dir_all(root.join("run/mysqld"))?;
    let mysql = uid_of(&root, "mysql")?;
    chown(root.join("run/mysqld"), Some(mysql), Some(mysql))?;
    // sid's client library looks for the server's socket in /run/mariadbd, trixie's in /run/mysqld.
    let alias = root.join("run/mariadbd");
    if std::fs::symlink_metadata(&alias).is_err() {
        std::os::unix::fs::symlink("mysqld", &alias)?;
    }
    exec_capture(
        state,
        None,
        &[
            "mariadb-install-db",
            "--user=mysql",
            "--datadir=/var/lib/mysql",
            "--skip-test-db",
            "--auth-root-authentication-method=socket",
        ],
    )?;
    spawn(
        state,
        "mariadb",
        config::CTL_HOST,
        false,
        None,
        &[
            "mariadbd",
            "--user=mysql",
            "--datadir=/var/lib/mysql",
            "--socket=/run/mysqld/mysqld.sock",
            "--pid-file=/run/mysqld/mysqld.pid",
            "--skip-networking",
            "--innodb-snapshot-isolation=OFF",
            "--innodb-buffer-pool-size=64M",
        ],
    )?;
    let socket = root.join("run/mysqld/mysqld.sock");
    if !wait_for(START_TIMEOUT, || socket.exists()) {
        bail!(
            "MariaDB did not create {}; see {}",
            socket.display(),
            state.log_dir().join("mariadb.out").display()
        );
    }
    let sql = format!(
        "CREATE DATABASE IF NOT EXISTS slurm_acct_db; \
         CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '{}'; \
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';",
        config::DB_PASSWORD
    );
    retry_exec(
        state,
        &["mariadb", "--socket=/run/mysqld/mysqld.sock", "-e", &sql],
    )?;
    Ok(())
}

fn seed_accounting(state: &State) -> Result<()> {
    let cluster = config::cluster_name(state.release);
    retry_exec(
        state,
        &[
            "sacctmgr",
            "-i",
            "add",
            "account",
            "science",
            &format!("cluster={cluster}"),
            "description=science",
            "organization=dev",
        ],
    )?;
    retry_exec(
        state,
        &[
            "sacctmgr",
            "-i",
            "add",
            "user",
            TEST_USER,
            "account=science",
        ],
    )?;
    retry_exec(
        state,
        &["sacctmgr", "-i", "add", "user", "root", "account=science"],
    )?;
    Ok(())
}

fn retry_exec(state: &State, argv: &[&str]) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match exec_capture(state, None, argv) {
            Ok(out) => return Ok(out),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

fn start_proxy(state: &mut State) -> Result<()> {
    let log = state.log_dir().join("proxy.out");
    let out = std::fs::File::create(&log)?;
    use std::os::unix::process::CommandExt;
    let mut proxy = Command::new(crate::THIS_BINARY);
    super::process::keep_no_inherited_files(&mut proxy);
    let child = proxy
        .args([
            "slurm",
            "proxy",
            "--listen",
            &format!("127.0.0.1:{}", state.port),
            "--socket",
        ])
        .arg(state.socket())
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .context("starting the REST proxy")?;
    state.daemons.push(Daemon {
        name: "proxy".into(),
        pid: child.id(),
    });
    let port = state.port;
    if !wait_for(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }) {
        bail!(
            "the REST proxy did not listen on 127.0.0.1:{port}; see {}",
            log.display()
        );
    }
    Ok(())
}

pub fn mint_token(state: &State, user: &str) -> Result<String> {
    let lifespan = format!("lifespan={}", 7 * 24 * 3600);
    let username = format!("username={user}");
    let out = retry_exec(state, &["scontrol", "token", &username, &lifespan])?;
    out.trim()
        .strip_prefix("SLURM_JWT=")
        .map(str::to_owned)
        .context("`scontrol token` printed no SLURM_JWT=…")
}

/// Waits until slurmrestd answers an authenticated ping through its unix socket.
fn wait_rest(state: &State, token: &str) -> Result<()> {
    let socket = state.socket();
    let version = state.release.rest_versions()[0];
    let request = format!(
        "GET /slurm/{version}/ping HTTP/1.1\r\nHost: localhost\r\nX-SLURM-USER-TOKEN: {token}\r\nConnection: close\r\n\r\n"
    );
    let mut last = String::new();
    let log = state.log_dir().join("slurmrestd.out");
    let answered = wait_for(START_TIMEOUT, || match http_status(&socket, &request) {
        Ok(status) => {
            last = status;
            last.contains(" 200 ")
        }
        Err(e) => {
            last = e.to_string();
            false
        }
    });
    if !answered {
        bail!(
            "slurmrestd did not answer a ping on {} (last: {last}); see {}",
            socket.display(),
            log.display()
        );
    }
    Ok(())
}

fn http_status(socket: &Path, request: &str) -> Result<String> {
    let mut conn = UnixStream::connect(socket)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.write_all(request.as_bytes())?;
    let mut response = String::new();
    conn.read_to_string(&mut response)?;
    Ok(response.lines().next().unwrap_or_default().to_owned())
}

fn wait_nodes_idle(state: &State) -> Result<()> {
    let mut last = String::new();
    let idle = wait_for(START_TIMEOUT, || {
        // The real nodes only: virtual ones never answer.
        let list = ["sinfo", "-h", "-N", "-p", "debug", "-o", "%N %T"];
        match exec_capture(state, None, &list) {
            Ok(out) => {
                let ready = out.lines().count() == state.nodes as usize
                    && out.lines().all(|l| l.ends_with(" idle"));
                last = out;
                ready
            }
            Err(e) => {
                last = e.to_string();
                false
            }
        }
    });
    if !idle {
        bail!("the nodes did not become idle: {}", last.trim());
    }
    Ok(())
}

fn write_env(state: &State, token: &str, user_token: &str) -> Result<()> {
    let release = state.release;
    let body = format!(
        "# Slurm {release} dev cluster, written by `cargo xtask slurm up`\n\
         SLURM_REST_URL=http://127.0.0.1:{port}\n\
         SLURM_REST_SOCKET={socket}\n\
         SLURM_USER_NAME=root\n\
         SLURM_JWT={token}\n\
         SLURM_JWT_KEY={key}\n\
         SLURM_RELEASE={release}\n\
         SLURM_ACCOUNTING={acct}\n\
         SLURM_CLUSTER_NAME={cluster}\n\
         SLURM_NODES={nodes}\n\
         SLURM_TEST_USER={TEST_USER}\n\
         SLURM_TEST_USER_JWT={user_token}\n{virtual}",
        port = state.port,
        socket = state.socket().display(),
        key = state.root.join("etc/slurm/jwt_hs256.key").display(),
        acct = u8::from(state.accounting),
        cluster = config::cluster_name(release),
        nodes = state.nodes,
        virtual = if state.virtual_nodes > 0 {
            format!("SLURM_VIRTUAL_NODES={}\n", state.virtual_nodes)
        } else {
            String::new()
        },
    );
    let path = state::env_file(release);
    std::fs::write(&path, body)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// Polls `ready` until it holds or `timeout` passes; false on time-out.
fn wait_for(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Stops everything `up` started for `release`, whatever state it was left in. Returns whether anything ran.
pub fn down(release: Release) -> Result<bool> {
    let state = State::load(release)?;
    let root = state
        .as_ref()
        .map(|s| s.root.clone())
        .unwrap_or_else(|| rootfs::root_path(release));
    let netns_path = Path::new("/run/netns").join(netns_name(release));
    let proxy: Vec<u32> = state
        .iter()
        .flat_map(|s| &s.daemons)
        .filter(|d| d.name == "proxy" && process::is_running(d.pid))
        .filter(|d| process::cmdline(d.pid).iter().any(|a| a == "proxy"))
        .map(|d| d.pid)
        .collect();
    let mut any = !proxy.is_empty();
    process::stop(&proxy, Duration::from_secs(5));
    // A process that was on its way in when we looked (an interrupted `up`) shows up on the next look.
    let mut quiet_rounds = 0;
    while quiet_rounds < 2 {
        let pids = process::in_cluster(&root, &netns_path);
        if pids.is_empty() {
            quiet_rounds += 1;
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        quiet_rounds = 0;
        any = true;
        let killed = process::stop(&pids, Duration::from_secs(15));
        if !killed.is_empty() {
            eprintln!("had to SIGKILL {killed:?}");
        }
    }
    netns::delete(&netns_name(release))?;
    let dir = state::run_dir(release);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(any)
}
