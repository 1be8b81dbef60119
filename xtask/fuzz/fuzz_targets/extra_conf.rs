//! Fuzz target `extra_conf`: see `fuzz_targets::extra_conf`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::extra_conf(data));
