//! Replays every file of the committed corpora (`xtask/fuzz/corpus/<target>/`: the seeds and
//! every crash fuzzing found, minimized) through its target, on stable, as part of the normal
//! test run; and checks that the targets reach their parsers.

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

#[test]
fn every_corpus_file_replays_without_a_panic() {
    for (target, run) in fuzz_targets::TARGETS {
        let dir = corpus(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: no seeds", dir.display());
        for file in files {
            let data = std::fs::read(&file).expect("corpus file");
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{target}: {} panics", file.display());
        }
    }
}

#[test]
fn extra_conf_reaches_the_rules() {
    // The target builds each kind from `extraConf` alone: the kinds must accept that.
    use slurm_operator::crd::{Accounting, Controller, NodeSet};
    for kind in ["Controller", "Accounting", "NodeSet"] {
        let object = serde_json::json!({
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": kind,
            "metadata": {"name": "x", "namespace": "slurm"},
            "spec": {"extraConf": "SlurmctldDebug=info"},
        });
        let ok = match kind {
            "Controller" => serde_json::from_value::<Controller>(object).is_ok(),
            "Accounting" => serde_json::from_value::<Accounting>(object).is_ok(),
            _ => serde_json::from_value::<NodeSet>(object).is_ok(),
        };
        assert!(ok, "{kind} with only extraConf does not decode");
    }
}
