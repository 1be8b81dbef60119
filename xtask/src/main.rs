//! The project's own tasks: `cargo xtask --help`.

mod bench;
mod conformance;
mod demo;
mod fixtures;
mod fuzz;
mod generate;
mod helm;
mod image;
mod kube;
mod msrv;
mod openapi;
mod release;
mod slurm;
mod test;
mod unified;

use clap::{Parser, Subcommand};

/// The running xtask binary, for starting helpers (the REST proxy, fixture recorders) from it.
/// Not `current_exe()`: a `cargo test -p xtask` or `cargo build` during a run replaces the file at
/// that path, and the path then names nothing (or another build); this one stays the running binary.
pub const THIS_BINARY: &str = "/proc/self/exe";

/// Where cargo puts what it builds for this workspace (`CARGO_TARGET_DIR`, else `target/`).
pub fn target_dir(workspace: &std::path::Path) -> std::path::PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Development tasks for the slurm-rs workspace"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Local Slurm clusters for development and tests.
    #[command(subcommand)]
    Slurm(slurm::SlurmCmd),
    /// The whole system on this machine: the Kubernetes test ground, the project's images and Helm
    /// charts (operator, a Slurm cluster from custom resources, exporter, bridge) and a pod scheduled
    /// by Slurm; `demo client`: a Slurm cluster and the client/CLI; `demo operator`: the operator from
    /// source.
    Demo(demo::DemoArgs),
    /// Everything CI runs: generated-code check, fmt, clippy, all tests against real Slurm 24.11 and
    /// 26.05 clusters started and stopped here (needs root), and a build of the benchmarks.
    Test {
        /// Extra arguments for the test binaries run against the local Slurm clusters, e.g. a test
        /// name filter.
        #[arg(trailing_var_arg = true)]
        cargo_args: Vec<String>,
    },
    /// Only the tests against local Slurm 24.11 and 26.05 clusters (the workspace's, the doc tests,
    /// slurm-client's examples, the exporter without slurmdbd), started and stopped here (needs
    /// root); `cargo xtask test` runs them beside the ground tests.
    TestSlurm {
        /// The unified build's artifacts as `cargo xtask test` wrote them, instead of building.
        #[arg(long, hide = true)]
        artifacts: Option<std::path::PathBuf>,
        /// Extra arguments for the test binaries, e.g. a test name filter.
        #[arg(trailing_var_arg = true)]
        cargo_args: Vec<String>,
    },
    /// The benchmarks, printing figures: the exporter at 2,000 nodes and 20,000 jobs against a real
    /// Slurm 26.05 cluster started and stopped here (needs root), and the client's benchmarks.
    Bench {
        /// Fewer rounds (sets SLURM_BENCH_QUICK=1).
        #[arg(long)]
        quick: bool,
    },
    /// OCI images of the Slurm daemons (Slinky's names and contract), MariaDB and a toolbox, built from
    /// Debian packages into target/images/*.oci.tar and the local image store (needs root).
    Image(image::ImageCmd),
    /// Real Helm 4 (Go SDK from PyPI's helm-python-sdk, in a venv) for the charts: `lint`, `template`,
    /// `install`, `upgrade`, `uninstall`, `list`, `package`; the cluster is $KUBECONFIG or the test ground.
    Helm(helm::HelmCmd),
    /// The Kubernetes test ground: etcd and a real API server on 127.0.0.1:6443 (needs root).
    #[command(subcommand)]
    Kube(kube::KubeCmd),
    /// slurmrestd's OpenAPI specs.
    #[command(subcommand)]
    Openapi(OpenapiCmd),
    /// Recorded slurmrestd responses for slurm-client's decode tests and benchmarks.
    #[command(subcommand)]
    Fixtures(fixtures::FixturesCmd),
    /// Conformance with Slinky's own charts: `conformance slinky --chart DIR` installs the `slurm`
    /// chart of a SlinkyProject/slurm-operator checkout as Helm renders it, on this project's
    /// CRDs and operator on the test ground, and checks each case comes up and runs a job.
    #[command(subcommand)]
    Conformance(conformance::ConformanceCmd),
    /// Cut a release: one version for the crates, images and charts; changelog, semver and
    /// `cargo publish --dry-run` checks, a commit and a tag, then the images and chart packages.
    Release(release::ReleaseArgs),
    /// The published crates' public API against the last release (cargo-semver-checks, installed
    /// on first use): a breaking change fails unless the version in Cargo.toml announces it.
    Semver {
        /// A git revision to compare with instead of the last release.
        #[arg(long)]
        baseline: Option<String>,
        /// Skip a crate whose API inputs (its src/ and build.rs, its manifest but for the
        /// test-only tables, openapi/, the workspace's `[workspace.dependencies]`) did not change
        /// since the baseline (what CI runs).
        #[arg(long)]
        if_changed: bool,
    },
    /// The fuzz targets of xtask/fuzz (cargo-fuzz, libFuzzer; needs a nightly toolchain and
    /// installs cargo-fuzz on first use), one or each in turn; seeds in xtask/fuzz/corpus/,
    /// crashes left in xtask/fuzz/artifacts/.
    Fuzz {
        /// One target (default: each in turn): hostlist, jobs_decode, nodes_decode,
        /// stream_split, operator_review, bridge_review, bridge_annotations, sbatch, extra_conf.
        target: Option<String>,
        /// How long each target runs.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// slurm-client built with its MSRV, Debian trixie's rustc and cargo (in a root made with
    /// mmdebstrap, cached), from the crate as `cargo package` makes it, offline (needs root).
    Msrv,
    /// Generate slurm-client's per-version modules from openapi/*.json and openapi/overlay.json.
    Generate {
        /// Fail, naming the stale files, if the committed generated code differs.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Debug, Subcommand)]
enum OpenapiCmd {
    /// Dump each REST version's spec from the real slurmrestd binaries into openapi/ (needs root).
    Fetch,
}

/// The workspace root, whatever directory cargo was run from.
fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is in the workspace")
        .to_owned()
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Slurm(cmd) => slurm::run(cmd),
        Cmd::Demo(args) => demo::run(&workspace(), &args),
        Cmd::Test { cargo_args } => test::run(&workspace(), &cargo_args),
        Cmd::TestSlurm {
            artifacts,
            cargo_args,
        } => test::run_slurm_lane(&workspace(), artifacts.as_deref(), &cargo_args),
        Cmd::Bench { quick } => bench::run(&workspace(), quick),
        Cmd::Openapi(OpenapiCmd::Fetch) => openapi::fetch(&workspace()),
        Cmd::Fixtures(cmd) => fixtures::run(&workspace(), cmd),
        Cmd::Generate { check } => generate::run(check),
        Cmd::Msrv => msrv::run_check(&workspace()),
        Cmd::Fuzz { target, seconds } => fuzz::run(&workspace(), target.as_deref(), seconds),
        Cmd::Image(cmd) => image::run(&workspace(), cmd),
        Cmd::Kube(cmd) => kube::run(cmd, &workspace()),
        Cmd::Helm(cmd) => helm::run(&workspace(), cmd),
        Cmd::Conformance(cmd) => conformance::run(&workspace(), &cmd),
        Cmd::Release(args) => release::run(&workspace(), &args),
        Cmd::Semver {
            baseline,
            if_changed,
        } => release::semver::check(&workspace(), baseline.as_deref(), if_changed),
    }
}
