//! The slurm-client examples against real clusters: every example program the unified build made
//! (slurm-client/examples/*.rs) and every script beside them (*.sh, with the built `slurm` on the
//! PATH), run with a cluster's env file. Each must exit 0 within [`TIMEOUT`]; the output of each is
//! printed when it fails, and kept in the cluster's run dir (`/run/slurm-dev/<release>/examples/`)
//! until the cluster stops.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::slurm::{Release, state};
use crate::unified::Artifact;

const PACKAGE: &str = "slurm-client";

/// Longest any one may take: a job submitted and waited for, a few polls.
const TIMEOUT: Duration = Duration::from_secs(180);

/// What makes an example end quickly, and what its stdout must start with; an example not listed
/// runs without arguments.
const EXAMPLES: &[(&str, &[&str], Option<&str>)] = &[
    ("follow_nodes", &["--polls", "3", "--interval", "1"], None),
    ("mint_token", &[], Some("SLURM_JWT=")),
];

pub fn run(built: &[Artifact], releases: &[Release]) -> Result<()> {
    let mut programs: Vec<&Artifact> = built
        .iter()
        .filter(|a| a.package == PACKAGE && a.kind == "example")
        .collect();
    programs.sort_by(|a, b| a.name.cmp(&b.name));
    // The program, not its unit-test harness (both are kind "bin").
    let slurm = built
        .iter()
        .find(|a| a.package == PACKAGE && a.kind == "bin" && a.name == "slurm" && !a.harness)
        .context("the unified build made no `slurm` binary (feature `cli`)")?;
    if programs.is_empty() {
        bail!("the unified build made no example of {PACKAGE}");
    }
    let scripts = scripts(&slurm.package_dir.join("examples"))?;
    let bin_dir = slurm
        .executable
        .parent()
        .context("slurm has no directory")?;
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;

    let mut failed = Vec::new();
    for &release in releases {
        let env = read_env(&state::env_file(release))?;
        let logs = state::run_dir(release).join("examples");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        for example in &programs {
            let (args, expect) = EXAMPLES
                .iter()
                .find(|(name, ..)| *name == example.name)
                .map_or((&[][..], None), |(_, args, expect)| (*args, *expect));
            let mut cmd = Command::new(&example.executable);
            cmd.args(args).current_dir(&example.package_dir);
            let label = format!("{release} {}", example.name);
            if let Err(e) = run_one(&label, cmd, &env, &logs.join(&example.name), expect) {
                eprintln!("  FAIL  {e:#}");
                failed.push(label);
            }
        }
        for script in &scripts {
            let name = script.file_name().unwrap_or_default().to_string_lossy();
            let mut cmd = Command::new("sh");
            cmd.arg(script)
                .current_dir(&slurm.package_dir)
                .env("PATH", &path);
            let label = format!("{release} {name}");
            if let Err(e) = run_one(&label, cmd, &env, &logs.join(&*name), None) {
                eprintln!("  FAIL  {e:#}");
                failed.push(label);
            }
        }
    }
    if !failed.is_empty() {
        bail!("slurm-client examples failed: {}", failed.join(", "));
    }
    Ok(())
}

/// The shell scripts among the examples, by name.
fn scripts(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "sh") {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// The `KEY=value` lines `cargo xtask slurm up` writes.
fn read_env(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the cluster env file {}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("export ").unwrap_or(l).split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

/// Runs `cmd` with the cluster's variables only (none of this process's SLURM_*), output to
/// `<log>.out` and `<log>.err`; fails naming `label` and showing the output.
fn run_one(
    label: &str,
    mut cmd: Command,
    env: &BTreeMap<String, String>,
    log: &Path,
    stdout_starts_with: Option<&str>,
) -> Result<()> {
    let (out_path, err_path) = (log.with_extension("out"), log.with_extension("err"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SLURM_") {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path)?)
        .stderr(File::create(&err_path)?)
        // Its own group, so that a time-out also ends what a script started.
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("{label}: running {cmd:?}"))?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > TIMEOUT {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let secs = started.elapsed().as_secs_f64();
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let problem = match status {
        None => Some(format!("did not end within {TIMEOUT:?}")),
        Some(s) if !s.success() => Some(format!("failed ({s})")),
        // Built as a libtest harness, it runs zero tests instead of the program.
        _ if stdout.starts_with("\nrunning 0 tests") => {
            Some("ran as a test harness: declare it with `harness = false`".into())
        }
        _ => stdout_starts_with
            .filter(|prefix| !stdout.starts_with(prefix))
            .map(|prefix| format!("printed no `{prefix}…`")),
    };
    let Some(problem) = problem else {
        eprintln!("  ok    {label} ({secs:.1} s)");
        return Ok(());
    };
    for (name, text) in [("stdout", redact(&stdout)), ("stderr", redact(&stderr))] {
        eprintln!("  --- {label}: {name} ---");
        for line in text.lines() {
            eprintln!("  {line}");
        }
    }
    bail!("{label} {problem} after {secs:.1} s")
}

/// The output without tokens (`SLURM_JWT=…`, as mint_token prints).
fn redact(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once("SLURM_JWT=") {
            Some((before, _)) => format!("{before}SLURM_JWT=<redacted>"),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_file_lines_and_redaction() {
        let dir = std::env::temp_dir().join(format!("xtask-examples-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cluster.env");
        std::fs::write(
            &path,
            "# written by cargo xtask slurm up\nSLURM_REST_URL=http://127.0.0.1:6826\n\
             SLURM_JWT=a.b.c\n\nexport SLURM_USER_NAME=root\n",
        )
        .unwrap();
        let env = read_env(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(env["SLURM_REST_URL"], "http://127.0.0.1:6826");
        assert_eq!(env["SLURM_USER_NAME"], "root");
        assert_eq!(env.len(), 3, "{env:?}");
        assert_eq!(
            redact("minted\nSLURM_JWT=a.b.c\nexport SLURM_JWT=x"),
            "minted\nSLURM_JWT=<redacted>\nexport SLURM_JWT=<redacted>"
        );
    }
}
