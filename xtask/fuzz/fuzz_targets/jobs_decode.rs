//! Fuzz target `jobs_decode`: see `fuzz_targets::jobs_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::jobs_decode(data));
