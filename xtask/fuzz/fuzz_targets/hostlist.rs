//! Fuzz target `hostlist`: see `fuzz_targets::hostlist`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::hostlist(data));
