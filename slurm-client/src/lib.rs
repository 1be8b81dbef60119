//! Typed async client for slurmrestd.
