//! Trackable resources (TRES) as Slurm prints them: `cpu=4,mem=8G,node=1,gres/gpu=2`.

use std::collections::BTreeMap;

use serde::Serialize;

/// A set of trackable resources, e.g. what a job requested or was allocated.
///
/// Kept as Slurm's `name=value` pairs (values may carry a unit, as in `mem=8G`); the
/// helpers read counts out of them. Build one with [`Tres::parse`] or by collecting
/// `(name, value)` pairs.
///
/// ```
/// use slurm_client::Tres;
/// let tres = Tres::parse("cpu=4,mem=8G,node=1,gres/gpu=2,gres/gpu:a100=2");
/// assert_eq!(tres.count("cpu"), Some(4));
/// assert_eq!(tres.memory_mb(), Some(8192));
/// assert_eq!(tres.gpus(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
#[non_exhaustive]
pub struct Tres {
    /// `name → value` as Slurm wrote them, e.g. `"mem" → "8G"`.
    pub entries: BTreeMap<String, String>,
}

impl Tres {
    /// Parses `cpu=4,mem=8G,…`; entries without `=` are ignored.
    pub fn parse(text: &str) -> Tres {
        let entries = text
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .filter(|(k, _)| !k.is_empty())
            .collect();
        Tres { entries }
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The raw value of `name`, e.g. `"8G"` for `mem`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries.get(name).map(String::as_str)
    }

    /// The value of `name` as a number, with a K/M/G/T/P suffix multiplied out (powers of
    /// 1024), e.g. `count("cpu")`.
    pub fn count(&self, name: &str) -> Option<u64> {
        self.get(name).and_then(parse_count)
    }

    /// Memory in MiB (`mem`, whose unit-less numbers are MiB).
    pub fn memory_mb(&self) -> Option<u64> {
        let raw = self.get("mem")?;
        if raw.chars().last()?.is_ascii_digit() {
            return raw.parse().ok();
        }
        parse_count(raw).map(|bytes_in_m| bytes_in_m / (1024 * 1024))
    }

    /// GPUs: `gres/gpu` if present, otherwise the sum of typed `gres/gpu:<type>` entries.
    pub fn gpus(&self) -> u64 {
        if let Some(n) = self.count("gres/gpu") {
            return n;
        }
        self.entries
            .iter()
            .filter(|(k, _)| k.starts_with("gres/gpu:"))
            .filter_map(|(_, v)| parse_count(v))
            .sum()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Tres {
    /// Collects `(name, value)` pairs, e.g. `[("cpu", "8"), ("gres/gpu", "1")]`.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Tres {
        Tres {
            entries: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// `"8G"` → 8·1024³, `"12"` → 12; `None` if not a number.
fn parse_count(raw: &str) -> Option<u64> {
    let raw = raw.trim();
    let (digits, unit) = match raw.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => raw.split_at(i),
        None => (raw, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "P" => 50,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counts_and_units() {
        let t = Tres::parse("cpu=2,mem=500M,node=1,billing=2");
        assert_eq!(t.count("cpu"), Some(2));
        assert_eq!(t.memory_mb(), Some(500));
        assert_eq!(t.count("node"), Some(1));
        assert_eq!(t.gpus(), 0);
        assert_eq!(Tres::parse("mem=4096").memory_mb(), Some(4096));
        assert_eq!(Tres::parse("mem=1T").memory_mb(), Some(1024 * 1024));
        assert!(Tres::parse("").is_empty());
    }

    #[test]
    fn collects_pairs() {
        let t: Tres = [("cpu", "8"), ("gres/gpu", "1")].into_iter().collect();
        assert_eq!(t, Tres::parse("cpu=8,gres/gpu=1"));
    }

    #[test]
    fn gpus_from_typed_entries() {
        assert_eq!(Tres::parse("gres/gpu:a100=2,gres/gpu:v100=1").gpus(), 3);
        assert_eq!(Tres::parse("gres/gpu=4,gres/gpu:a100=4").gpus(), 4);
    }
}
