//! The figures both benches print, from samples and the bridge's debug log.

use std::time::Duration;

/// The total of `bytes=` over the client's "slurmrestd answered" debug lines.
pub fn rest_bytes(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("slurmrestd answered"))
        .filter_map(|l| {
            let rest = &l[l.find("bytes=")? + "bytes=".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        })
        .sum()
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
