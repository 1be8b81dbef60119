//! Fuzz target `bridge_annotations`: see `fuzz_targets::bridge_annotations`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::bridge_annotations(data));
