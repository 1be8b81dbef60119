//! The figures both benches print, from samples and the bridge's debug log.

use std::time::Duration;

/// The total of `bytes=` over the client's "slurmrestd answered" debug lines.
pub fn rest_bytes(log: &str) -> u64 {
    field_values(log, "slurmrestd answered", "bytes").sum()
}

/// The values of numeric field `field` on the log lines with `message`.
pub fn field_values<'a>(
    log: &'a str,
    message: &'a str,
    field: &'a str,
) -> impl Iterator<Item = u64> + 'a {
    let key = format!("{field}=");
    log.lines()
        .filter(move |l| l.contains(message))
        .filter_map(move |l| {
            let rest = &l[l.find(&key)? + key.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        })
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
