//! Fuzz target `sbatch`: see `fuzz_targets::sbatch`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::sbatch(data));
