//! Fuzz target `stream_split`: see `fuzz_targets::stream_split`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::stream_split(data));
