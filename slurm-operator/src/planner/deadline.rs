//! The `pod-deadline` annotation: when the last running job on a pod's Slurm node reaches
//! its time limit. Scale-in prefers pods whose work ends sooner.

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use slurm_client::model::Limit;

/// When a running job hits its time limit: start + limit. An unlimited job never does
/// (`Timestamp::MAX`); a missing start or limit counts as 0, as Slinky reads them.
pub fn job_deadline(start_time: Option<i64>, time_limit_minutes: Limit<u32>) -> Timestamp {
    let start = Timestamp::from_second(start_time.unwrap_or(0)).unwrap_or(Timestamp::UNIX_EPOCH);
    match time_limit_minutes {
        Limit::Infinite => Timestamp::MAX,
        limit => start
            .checked_add(SignedDuration::from_mins(i64::from(limit.value_or(0))))
            .unwrap_or(Timestamp::MAX),
    }
}

/// Records `deadline` for each of a running job's nodes, keeping the latest per node.
pub fn record<'a>(
    deadlines: &mut HashMap<String, Timestamp>,
    nodes: impl IntoIterator<Item = &'a str>,
    deadline: Timestamp,
) {
    for node in nodes {
        let slot = deadlines.entry(node.to_string()).or_insert(deadline);
        if deadline > *slot {
            *slot = deadline;
        }
    }
}

/// The annotation value: RFC 3339 in UTC, whole seconds.
pub fn format(deadline: Timestamp) -> String {
    truncate(deadline)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Parses an annotation value (any RFC 3339 offset).
pub fn parse(text: &str) -> Option<Timestamp> {
    text.trim().parse().ok()
}

pub(crate) fn truncate(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines() {
        let t = job_deadline(Some(1_700_000_000), Limit::Value(60));
        assert_eq!(t.as_second(), 1_700_003_600);
        assert_eq!(format(t), "2023-11-14T23:13:20Z");
        assert_eq!(parse("2023-11-14T23:13:20Z"), Some(t));
        assert_eq!(parse("2023-11-15T00:13:20+01:00"), Some(t));
        assert_eq!(parse("soon"), None);
        assert_eq!(job_deadline(Some(5), Limit::Infinite), Timestamp::MAX);
        assert_eq!(job_deadline(None, Limit::Unset), Timestamp::UNIX_EPOCH);
        assert!(format(Timestamp::MAX).starts_with("9999-12-"));

        let mut map = HashMap::new();
        record(&mut map, ["a", "b"], t);
        record(&mut map, ["b"], Timestamp::MAX);
        record(&mut map, ["a"], Timestamp::UNIX_EPOCH);
        assert_eq!(map["a"], t);
        assert_eq!(map["b"], Timestamp::MAX);
    }
}
