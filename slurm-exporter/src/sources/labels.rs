//! Turning Slurm's words into label values and its units into base units.

/// Slurm's spelling of a state or flag as a label value: `NOT_RESPONDING` → `not_responding`.
pub fn state_label(slurm: &str) -> String {
    slurm.to_ascii_lowercase()
}

/// Slurm's megabytes (MiB) in bytes.
pub fn mib_to_bytes(mib: u64) -> f64 {
    mib as f64 * 1024.0 * 1024.0
}

/// Slurm's microseconds in seconds.
pub fn micros_to_seconds(us: u64) -> f64 {
    us as f64 / 1e6
}

/// A sorted, comma-separated list, for info labels (stable whatever order Slurm sends).
pub fn list_label<S: AsRef<str>>(items: &[S]) -> String {
    let mut v: Vec<&str> = items
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| !s.is_empty())
        .collect();
    v.sort_unstable();
    v.dedup();
    v.join(",")
}

/// The partitions a job names: pending jobs may list several (`debug,batch`).
pub fn partitions_of(partition: Option<&str>) -> impl Iterator<Item = &str> {
    partition
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(state_label("NOT_RESPONDING"), "not_responding");
        assert_eq!(mib_to_bytes(2), 2_097_152.0);
        assert_eq!(micros_to_seconds(1_500_000), 1.5);
        assert_eq!(list_label(&["b", "a", "", "b"]), "a,b");
        assert_eq!(
            partitions_of(Some("debug, batch")).collect::<Vec<_>>(),
            ["debug", "batch"]
        );
        assert_eq!(partitions_of(None).count(), 0);
    }
}
