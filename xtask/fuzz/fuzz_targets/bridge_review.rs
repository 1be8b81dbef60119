//! Fuzz target `bridge_review`: see `fuzz_targets::bridge_review`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::bridge_review(data));
