//! Turning model values into table cells, and parsing durations from flags.

use std::fmt::Display;
use std::time::{SystemTime, UNIX_EPOCH};

use slurm_client::Limit;

/// What an empty cell shows.
pub const NONE: &str = "-";

pub use slurm_client::parse_duration;

/// Parses a time limit as Slurm's `--time` does: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`,
/// `D-HH:MM`, `D-HH:MM:SS`, or a duration with a unit (`2h`); gives whole minutes
/// (rounded up). `infinite`/`unlimited` give `Infinite`.
pub fn parse_time_limit(text: &str) -> Result<Limit<u32>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("infinite") || t.eq_ignore_ascii_case("unlimited") {
        return Ok(Limit::Infinite);
    }
    let bad =
        || format!("{text:?} is not a time limit such as 30 (minutes), 1:30:00, 2-00:00:00 or 2h");
    let seconds: u64 = if t.ends_with(|c: char| c.is_ascii_alphabetic()) {
        parse_duration(t).map_err(|e| e.to_string())?.as_secs()
    } else {
        let (days, rest) = match t.split_once('-') {
            Some((d, rest)) => (d.parse::<u64>().map_err(|_| bad())?, rest),
            None => (0, t),
        };
        let parts: Vec<u64> = rest
            .split(':')
            .map(|p| p.parse::<u64>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let (h, m, s) = match (t.contains('-'), parts.as_slice()) {
            (false, [m]) => (0, *m, 0),
            (false, [m, s]) => (0, *m, *s),
            (_, [h, m, s]) => (*h, *m, *s),
            (true, [h]) => (*h, 0, 0),
            (true, [h, m]) => (*h, *m, 0),
            _ => return Err(bad()),
        };
        // Checked: `99999999999999999-0` overflowed (a panic in debug builds, a wrong
        // limit in release ones).
        days.checked_mul(24)
            .and_then(|t| {
                t.checked_add(h)?
                    .checked_mul(60)?
                    .checked_add(m)?
                    .checked_mul(60)?
                    .checked_add(s)
            })
            .ok_or_else(|| format!("{text:?} is too long"))?
    };
    let minutes = seconds.div_ceil(60).max(1);
    u32::try_from(minutes)
        .map(Limit::Value)
        .map_err(|_| format!("{text:?} is too long"))
}

/// Parses a memory size as Slurm does: a number of MiB, or with a unit K, M, G or T.
pub fn parse_memory_mb(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || format!("{text:?} is not a memory size such as 512 (MiB), 512M or 4G");
    let too_big = || format!("{text:?} is too large a memory size");
    let (number, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = number.parse().map_err(|_| bad())?;
    let mb = match unit.to_ascii_uppercase().trim_end_matches('B') {
        "" | "M" => n,
        "K" => n.div_ceil(1024),
        "G" => n.checked_mul(1024).ok_or_else(too_big)?,
        "T" => n.checked_mul(1024 * 1024).ok_or_else(too_big)?,
        _ => return Err(bad()),
    };
    Ok(mb)
}

/// An optional value, or [`NONE`].
pub fn opt<T: Display>(value: Option<T>) -> String {
    value.map_or_else(|| NONE.to_string(), |v| v.to_string())
}

/// A Slurm number that may be unset or infinite.
pub fn limit<T: Display>(value: Limit<T>) -> String {
    match value {
        Limit::Value(v) => v.to_string(),
        Limit::Infinite => "UNLIMITED".into(),
        Limit::Unset => NONE.into(),
    }
}

/// A time limit in minutes, as `squeue` shows it (`1:00:00`, `2-00:00:00`, `UNLIMITED`).
pub fn minutes(value: Limit<u32>) -> String {
    match value {
        Limit::Value(m) => elapsed(u64::from(m) * 60),
        Limit::Infinite => "UNLIMITED".into(),
        Limit::Unset => NONE.into(),
    }
}

/// A memory size in MiB, shortened: `512M`, `4G`, `1.5T`.
pub fn memory_mb(mb: u64) -> String {
    if mb >= 1024 * 1024 && mb % (1024 * 1024) == 0 {
        format!("{}T", mb / (1024 * 1024))
    } else if mb >= 1024 && mb % 1024 == 0 {
        format!("{}G", mb / 1024)
    } else if mb >= 10 * 1024 {
        format!("{:.1}G", mb as f64 / 1024.0)
    } else {
        format!("{mb}M")
    }
}

/// Seconds as `squeue` shows a duration: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn elapsed(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// The current time in epoch seconds.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// An epoch time as `2025-01-31 13:45:00` (UTC), or [`NONE`].
pub fn time(epoch: Option<i64>) -> String {
    let Some(t) = epoch else {
        return NONE.into();
    };
    let (days, secs) = (t.div_euclid(86400), t.rem_euclid(86400));
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Parses a point in time: `now`, a time ago (`2h`, `7d`, `90m`), `YYYY-MM-DD` or
/// `YYYY-MM-DDTHH:MM[:SS]` (UTC); gives epoch seconds.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("now") {
        return Ok(now());
    }
    if let Some((date, clock)) = t
        .split_once(['T', ' '])
        .or(Some((t, "")))
        .filter(|(d, _)| d.contains('-'))
    {
        let bad =
            || format!("{text:?} is not a time such as 2h (ago), 2025-01-31 or 2025-01-31T13:45");
        let d: Vec<i64> = date
            .split('-')
            .map(|p| p.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let c: Vec<i64> = if clock.is_empty() {
            vec![0, 0, 0]
        } else {
            clock
                .split(':')
                .map(|p| p.parse().map_err(|_| bad()))
                .collect::<Result<_, _>>()?
        };
        let [y, mo, day] = d[..] else {
            return Err(bad());
        };
        let (h, mi, s) = match c[..] {
            [h, m] => (h, m, 0),
            [h, m, s] => (h, m, s),
            _ => return Err(bad()),
        };
        // The year is bounded so that the arithmetic below cannot overflow.
        if !(1..=9999).contains(&y)
            || !(1..=12).contains(&mo)
            || !(1..=31).contains(&day)
            || !(0..=23).contains(&h)
            || !(0..=59).contains(&mi)
            || !(0..=60).contains(&s)
        {
            return Err(bad());
        }
        return Ok(days_from_civil(y, mo as u32, day as u32) * 86400 + h * 3600 + mi * 60 + s);
    }
    let ago = parse_duration(t).map_err(|_| {
        format!("{text:?} is not a time such as 2h (ago), 2025-01-31 or 2025-01-31T13:45")
    })?;
    i64::try_from(ago.as_secs())
        .ok()
        .and_then(|ago| now().checked_sub(ago))
        .ok_or_else(|| format!("{text:?} is too long ago"))
}

/// Days since 1970-01-01 of a date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A list joined with commas, or [`NONE`] when empty.
pub fn list<T: Display>(items: &[T]) -> String {
    if items.is_empty() {
        return NONE.into();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_like_sbatch() {
        let m = |t| parse_time_limit(t).unwrap();
        assert_eq!(m("30"), Limit::Value(30));
        assert_eq!(m("1:30"), Limit::Value(2));
        assert_eq!(m("1:30:00"), Limit::Value(90));
        assert_eq!(m("2-0"), Limit::Value(2880));
        assert_eq!(m("1-02:03"), Limit::Value(1563));
        assert_eq!(m("1-00:00:00"), Limit::Value(1440));
        assert_eq!(m("2h"), Limit::Value(120));
        assert_eq!(m("unlimited"), Limit::Infinite);
        assert!(parse_time_limit("1:2:3:4").is_err());
        assert!(parse_time_limit("x").is_err());
    }

    #[test]
    fn points_in_time() {
        assert_eq!(parse_time("2023-11-14T22:13:20").unwrap(), 1_700_000_000);
        assert_eq!(parse_time("2000-02-29").unwrap(), 951_782_400);
        assert_eq!(parse_time("1970-01-01 00:01").unwrap(), 60);
        let ago = parse_time("2h").unwrap();
        assert!((now() - 7200 - ago).abs() <= 1);
        assert!(parse_time("2025-13-01").is_err());
        assert!(parse_time("yesterday").is_err());
        for days in [-1, 0, 59, 10_957, 19_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn huge_numbers_are_errors_not_overflows() {
        // Regressions: each overflowed (a panic in debug builds).
        assert!(
            parse_time_limit("99999999999999999-0")
                .unwrap_err()
                .contains("too long")
        );
        assert!(
            parse_time_limit("1:99999999999999999:0")
                .unwrap_err()
                .contains("too long")
        );
        assert!(
            parse_memory_mb("99999999999999999T")
                .unwrap_err()
                .contains("too large")
        );
        assert!(parse_time("99999999999999-01-01").is_err());
        assert!(parse_time("2024-01-01T-5:00").is_err());
        assert!(parse_time("99999999999999999999").is_err());
    }

    #[test]
    fn memory() {
        assert_eq!(parse_memory_mb("512").unwrap(), 512);
        assert_eq!(parse_memory_mb("4G").unwrap(), 4096);
        assert_eq!(parse_memory_mb("4gb").unwrap(), 4096);
        assert_eq!(parse_memory_mb("2048K").unwrap(), 2);
        assert!(parse_memory_mb("lots").is_err());
        assert_eq!(memory_mb(512), "512M");
        assert_eq!(memory_mb(4096), "4G");
        assert_eq!(memory_mb(15_000), "14.6G");
    }

    #[test]
    fn times_and_durations_render_like_slurm() {
        assert_eq!(elapsed(59), "0:59");
        assert_eq!(elapsed(3600), "1:00:00");
        assert_eq!(elapsed(90061), "1-01:01:01");
        assert_eq!(minutes(Limit::Value(60)), "1:00:00");
        assert_eq!(minutes(Limit::Infinite), "UNLIMITED");
        assert_eq!(time(Some(0)), "1970-01-01 00:00:00");
        assert_eq!(time(Some(1_700_000_000)), "2023-11-14 22:13:20");
        assert_eq!(time(Some(951_782_400)), "2000-02-29 00:00:00");
        assert_eq!(time(None), NONE);
    }
}
