//! Durations as people write them on command lines and in environment variables.

use std::time::Duration;

/// A text that is not a positive duration; the message names the text and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidDuration(String);

/// Parses `500ms`, `30s`, `15m`, `2h`, `1d` or a plain number of seconds (fractions allowed,
/// e.g. `1.5`). Zero and negative durations are refused.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(slurm_client::parse_duration("2m").unwrap(), Duration::from_secs(120));
/// assert!(slurm_client::parse_duration("soon").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, InvalidDuration> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| {
        InvalidDuration(format!(
            "{text:?} is not a duration such as 500ms, 30s, 15m, 2h or 1d"
        ))
    })?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        other => {
            return Err(InvalidDuration(format!(
                "{text:?}: unknown unit {other:?} (use ms, s, m, h or d)"
            )));
        }
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(InvalidDuration(format!(
            "{text:?} must be a positive duration"
        )));
    }
    // `from_secs_f64` panics beyond `Duration::MAX` (about 585 billion years).
    Duration::try_from_secs_f64(secs)
        .map_err(|_| InvalidDuration(format!("{text:?} is too long a duration")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        let ok = |t| parse_duration(t).unwrap();
        assert_eq!(ok("90"), Duration::from_secs(90));
        assert_eq!(ok("1.5"), Duration::from_millis(1500));
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
        assert_eq!(ok("1d"), Duration::from_secs(86400));
        let err = |t| parse_duration(t).unwrap_err().to_string();
        assert!(err("0s").contains("positive"));
        assert!(err("5 days").contains("\"days\""));
        assert!(err("1y").contains("unknown unit"));
        assert!(err("soon").contains("\"soon\""));
        // Regression: beyond `Duration::MAX` this panicked.
        assert!(err("99999999999999999999999").contains("too long"));
        assert!(err("1e400").contains("unknown unit"));
    }
}
