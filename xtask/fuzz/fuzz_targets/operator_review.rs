//! Fuzz target `operator_review`: see `fuzz_targets::operator_review`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::operator_review(data));
