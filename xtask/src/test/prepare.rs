//! What the later phases need besides the workspace build, made while it builds: the Slurm roots,
//! the Helm venv and the test ground's API server. The roots and the Debian sid download are
//! mostly waiting on the network and the disk, and a two-core Rust build leaves a core idle
//! whenever one big crate (the generated REST code, the kube stack) compiles alone: the Go build
//! fills those gaps at nice 10, so it hardly slows the Rust build down.

use std::path::Path;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Result, bail};

use crate::slurm::{self, Release};

/// The preparation running in a thread of its own. Dropped unwaited (the build failed), it is
/// still waited for: a Go build or mmdebstrap left running would write into the caches that the
/// next run reads.
pub struct Prepare(Option<JoinHandle<Result<()>>>);

impl Prepare {
    pub fn start(workspace: &Path) -> Prepare {
        let workspace = workspace.to_path_buf();
        Prepare(Some(std::thread::spawn(move || {
            lower_priority();
            let started = Instant::now();
            all(&workspace)?;
            eprintln!(
                "  (beside the build) Slurm roots, Helm venv and API server ready after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            Ok(())
        })))
    }

    pub fn wait(mut self) -> Result<()> {
        self.0
            .take()
            .expect("waited once")
            .join()
            .unwrap_or_else(|_| bail!("the preparation thread panicked"))
    }
}

impl Drop for Prepare {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            eprintln!("  waiting for the preparation (Slurm roots, Helm venv, API server) to end");
            let _ = thread.join();
        }
    }
}

/// The Slurm roots, the Helm venv and the API server, one after the other.
pub fn all(workspace: &Path) -> Result<()> {
    for release in Release::ALL {
        slurm::rootfs::ensure(release)?;
    }
    crate::helm::ensure()?;
    crate::kube::apiserver::ensure(workspace)?;
    Ok(())
}

/// Nice 10 for this thread and every process it starts (Linux keeps the nice value per thread,
/// and a child inherits its parent thread's). nix has no setpriority.
#[allow(unsafe_code)]
fn lower_priority() {
    // SAFETY: setpriority only reads its integer arguments; who = 0 is the calling thread.
    let failed = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) } != 0;
    if failed {
        eprintln!(
            "  could not lower the preparation's priority ({}); it runs at normal priority",
            std::io::Error::last_os_error()
        );
    }
}
