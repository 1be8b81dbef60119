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

/// A TRES set as `(name, value)` in base units: memory (`mem`, Slurm's MiB) in bytes,
/// everything else as counted. Entries that are not numbers are skipped.
pub fn tres_values(tres: &slurm_client::Tres) -> Vec<(&str, f64)> {
    tres.entries
        .keys()
        .filter_map(|name| {
            let value = if name == "mem" {
                tres.memory_mb().map(mib_to_bytes)
            } else {
                tres.count(name).map(|v| v as f64)
            };
            value.map(|v| (name.as_str(), v))
        })
        .collect()
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
        let tres = slurm_client::Tres::parse("cpu=4,mem=2G,gres/gpu=1,bad=x");
        assert_eq!(
            tres_values(&tres),
            [("cpu", 4.0), ("gres/gpu", 1.0), ("mem", 2147483648.0)]
        );
    }
}
