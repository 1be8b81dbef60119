//! The fuzz targets, one plain function per target taking the fuzzer's bytes: the parsers
//! that see outside input (slurmrestd's answers, AdmissionReview bodies, pod annotations,
//! batch scripts, users' `extraConf`). A target panics only when it finds a defect: every
//! parser must answer any input with a value or an error.
//!
//! `xtask/fuzz/` (cargo-fuzz, nightly, `cargo xtask fuzz`) runs them under libFuzzer; the
//! tests (`tests/corpora.rs`, stable) replay every file of the committed corpora
//! `xtask/fuzz/corpus/<target>/` through them, so CI replays the seeds and the regressions.

mod admission;
mod annotations;
mod decoders;
// The `slurm` binary's `format.rs`, where its `directives.rs` (see `sbatch`) looks for it; only
// its parsers are used here (and it is linted for slurm-client's older rust-version).
#[allow(dead_code, clippy::manual_is_multiple_of)]
#[path = "../../../slurm-client/src/bin/slurm/format.rs"]
mod format;
mod hostlist;
mod sbatch;

pub use admission::{bridge_review, extra_conf, operator_review};
pub use annotations::{bridge_annotations, node_annotations};
pub use decoders::{jobs_decode, nodes_decode, stream_split};
pub use hostlist::hostlist;
pub use sbatch::sbatch;

/// A fuzz target: takes the fuzzer's bytes, panics only on a defect.
pub type Target = fn(&[u8]);

/// Every target by name, as `cargo xtask fuzz` and the corpus replay name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("hostlist", hostlist),
    ("jobs_decode", jobs_decode),
    ("nodes_decode", nodes_decode),
    ("stream_split", stream_split),
    ("operator_review", operator_review),
    ("bridge_review", bridge_review),
    ("bridge_annotations", bridge_annotations),
    ("sbatch", sbatch),
    ("extra_conf", extra_conf),
    ("node_annotations", node_annotations),
];
