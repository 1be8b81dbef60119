//! Fuzz target `nodes_decode`: see `fuzz_targets::nodes_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::nodes_decode(data));
