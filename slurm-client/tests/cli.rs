//! The `slurm` command-line tool against real clusters (needs `--features cli`).
