//! The figures both benches print, from samples and the bridge's debug log.

use std::time::Duration;

/// The total of `bytes=` over the client's "slurmrestd answered" debug lines.
pub fn rest_bytes(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("slurmrestd answered"))
        .filter_map(|l| field(l, "bytes"))
        .sum()
}

/// The value of numeric field `name` of a log line.
pub fn field(line: &str, name: &str) -> Option<u64> {
    let key = format!("{name}=");
    let rest = &line[line.find(&key)? + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The `p`th percentile (nearest rank) of `samples`; zero without samples.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}
