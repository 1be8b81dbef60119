//! Fuzz target `node_annotations`: see `fuzz_targets::node_annotations`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::node_annotations(data));
