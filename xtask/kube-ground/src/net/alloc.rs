//! Pod IPs, recorded on disk as one file per address (`<dir>/<ip>`, holding the pod it belongs to),
//! so that a restarted kubelet neither reuses a live pod's address nor forgets a sandbox to delete.
//! Creating the file with `create_new` is the allocation: two allocators never get the same IP.

use std::io::{ErrorKind, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// An inclusive range of pod addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPool {
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
}

impl IpPool {
    fn iter(self) -> impl Iterator<Item = Ipv4Addr> {
        (u32::from(self.first)..=u32::from(self.last)).map(Ipv4Addr::from)
    }
}

/// One pod sandbox as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub ip: Ipv4Addr,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub netns: String,
}

fn path(dir: &Path, ip: Ipv4Addr) -> PathBuf {
    dir.join(ip.to_string())
}

pub fn records(dir: &Path) -> Result<Vec<Record>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        // A file being written, or not ours: its address stays taken, but it is no sandbox.
        if let Ok(r) = serde_json::from_str::<Record>(&text) {
            out.push(r);
        }
    }
    out.sort_by_key(|r| r.ip);
    Ok(out)
}

/// Takes the lowest free address of `pool` for `record` (whose `ip` is ignored).
pub fn allocate(dir: &Path, pool: IpPool, mut record: Record) -> Result<Record> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for ip in pool.iter() {
        let p = path(dir, ip);
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", p.display())),
        };
        record.ip = ip;
        let written = serde_json::to_vec(&record)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| Ok(file.write_all(&bytes)?));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&p);
            return Err(e).with_context(|| format!("writing {}", p.display()));
        }
        return Ok(record);
    }
    bail!(
        "no free pod IP in {}–{} for pod {}/{} (records in {})",
        pool.first,
        pool.last,
        record.namespace,
        record.name,
        dir.display()
    )
}

pub fn release(dir: &Path, ip: Ipv4Addr) -> Result<()> {
    let p = path(dir, ip);
    match std::fs::remove_file(&p) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", p.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(uid: &str) -> Record {
        Record {
            ip: Ipv4Addr::UNSPECIFIED,
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            netns: format!("kube-{uid}"),
        }
    }

    #[test]
    fn allocates_lowest_free_and_survives_a_restart() {
        let dir = std::env::temp_dir().join(format!("kube-ground-alloc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pool = IpPool {
            first: Ipv4Addr::new(10, 0, 0, 2),
            last: Ipv4Addr::new(10, 0, 0, 4),
        };
        let a = allocate(&dir, pool, record("a")).unwrap();
        let b = allocate(&dir, pool, record("b")).unwrap();
        assert_eq!((a.ip, b.ip), (pool.first, Ipv4Addr::new(10, 0, 0, 3)));
        release(&dir, a.ip).unwrap();
        release(&dir, a.ip).unwrap();
        // What is on disk is what a restarted allocator sees.
        assert_eq!(records(&dir).unwrap(), std::slice::from_ref(&b));
        assert_eq!(allocate(&dir, pool, record("c")).unwrap().ip, pool.first);
        allocate(&dir, pool, record("d")).unwrap();
        let err = allocate(&dir, pool, record("e")).unwrap_err().to_string();
        assert!(
            err.contains("no free pod IP") && err.contains("ns/e"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
