//! The private network namespace a cluster lives in: only `lo`, with one address per node.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sched::{CloneFlags, setns};

use super::sh::run;

pub fn exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

pub fn create(name: &str, addrs: &[String]) -> Result<()> {
    run(Command::new("ip").args(["netns", "add", name]))?;
    run(Command::new("ip").args(["-n", name, "link", "set", "lo", "up"]))?;
    for addr in addrs {
        run(Command::new("ip").args([
            "-n",
            name,
            "addr",
            "add",
            &format!("{addr}/8"),
            "dev",
            "lo",
        ]))?;
    }
    Ok(())
}

pub fn delete(name: &str) -> Result<()> {
    if exists(name) {
        run(Command::new("ip").args(["netns", "delete", name]))?;
    }
    Ok(())
}

/// Whether something accepts TCP connections on `addr` inside namespace `name`.
pub fn accepts(name: &str, addr: SocketAddr) -> bool {
    let ns = Path::new("/run/netns").join(name);
    // setns changes only the calling thread, so a short-lived thread does the probing.
    std::thread::spawn(move || {
        let Ok(file) = std::fs::File::open(&ns) else {
            return false;
        };
        setns(&file, CloneFlags::CLONE_NEWNET).is_ok()
            && TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
    })
    .join()
    .unwrap_or(false)
}

/// Waits until `what` listens on `addr` inside the namespace; the error names the log to read.
pub fn wait_listening(
    name: &str,
    addr: SocketAddr,
    what: &str,
    log: &Path,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if accepts(name, addr) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!(
        "{what} did not listen on {addr} within {timeout:?}; see {}",
        log.display()
    )
}

pub fn probe_addr(port: u16) -> SocketAddr {
    format!("127.0.0.1:{port}")
        .parse()
        .context("loopback address")
        .unwrap()
}
