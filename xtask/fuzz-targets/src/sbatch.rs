//! The CLI's `#SBATCH` directives. The parser lives in the `slurm` binary, not the library,
//! so its files are compiled here as they are: `directives.rs` with the binary's `format.rs`
//! (at this crate's root, where it looks for it) and a `SubmitArgs` of the same fields.

/// The binary's `cmd::jobs::SubmitArgs`, less its clap attributes and the fields the
/// directives do not set. A field the binary renames or retypes fails this build.
pub mod jobs {
    use slurm_client::Limit;

    #[derive(Debug, Default)]
    pub struct SubmitArgs {
        pub name: Option<String>,
        pub partition: Option<String>,
        pub account: Option<String>,
        pub qos: Option<String>,
        pub reservation: Option<String>,
        pub time: Option<Limit<u32>>,
        pub nodes: Option<u32>,
        pub ntasks: Option<u32>,
        pub cpus_per_task: Option<u32>,
        pub mem: Option<u64>,
        pub mem_per_cpu: Option<u64>,
        pub gres: Option<String>,
        pub constraint: Option<String>,
        pub chdir: Option<String>,
        pub stdout: Option<String>,
        pub stderr: Option<String>,
        pub comment: Option<String>,
        pub dependency: Option<String>,
        pub array: Option<String>,
        pub hold: bool,
        pub nice: Option<i64>,
    }
}

#[path = "../../../slurm-client/src/bin/slurm/cmd/directives.rs"]
pub mod directives;

/// A batch script's `#SBATCH` lines, read and applied as `slurm jobs submit` does.
pub fn sbatch(data: &[u8]) {
    let script = String::from_utf8_lossy(data);
    let lines = directives::words(&script);
    let mut args = jobs::SubmitArgs::default();
    let _ = directives::apply(&mut args, &lines);
}
