//! Running host commands with errors that say which command failed and what it printed.

use std::process::Command;

use anyhow::{Context, Result, bail};

/// Runs `cmd` to completion; on failure the error names the command and carries its output.
pub fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
