//! Turning an HTTP status and body into success or the right [`Error`].

use reqwest::Method;

use crate::decode::head;
use crate::envelope::Envelope;
use crate::error::Error;

/// Slurm error: "Protocol authentication error" (bad or expired token on `/slurm/`).
const AUTH_ERROR: i64 = 1007;
/// Slurm error: "Invalid job id specified".
const INVALID_JOB_ID: i64 = 2017;
/// Slurm error: "Unable to connect to database" — what `/slurmdb/` answers for a bad token.
const DB_CONNECTION: i64 = 7000;

/// Returns the error an answer stands for, or `None` if it is a success whose body
/// should be decoded.
pub(crate) fn classify(
    method: &Method,
    path: &str,
    status: u16,
    body: &[u8],
    env: &Envelope,
) -> Option<Error> {
    let method = method.clone();
    let path = path.to_string();
    let slurmdb_auth =
        status == 502 && path.contains("/slurmdb/") && env.has_error_number(DB_CONNECTION);
    if matches!(status, 401 | 403 | 511) || slurmdb_auth || env.has_error_number(AUTH_ERROR) {
        let detail = if env.errors.is_empty() {
            head(body)
        } else {
            env.errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        return Some(Error::Auth {
            method,
            path,
            status,
            detail,
        });
    }
    if status == 404 || env.has_error_number(INVALID_JOB_ID) {
        return Some(Error::NotFound {
            method,
            path,
            status,
            errors: env.errors.clone(),
        });
    }
    if !env.errors.is_empty() {
        return Some(Error::Rejected {
            method,
            path,
            status,
            errors: env.errors.clone(),
        });
    }
    match status {
        200..=299 => None,
        400 => Some(Error::BadRequest {
            method,
            path,
            text: head(body),
        }),
        _ => Some(Error::Status {
            method,
            path,
            status,
            excerpt: head(body),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(path: &str, status: u16, body: &str) -> Option<Error> {
        classify(
            &Method::GET,
            path,
            status,
            body.as_bytes(),
            &Envelope::parse(body.as_bytes()),
        )
    }

    const E1007: &str =
        r#"{"errors":[{"error_number":1007,"error":"Protocol authentication error"}]}"#;

    #[test]
    fn auth_failures() {
        assert_eq!(
            run("/slurm/v0.0.42/jobs", 511, E1007).unwrap().label(),
            "auth"
        );
        assert_eq!(
            run("/slurm/v0.0.42/jobs", 401, "Authentication failure")
                .unwrap()
                .label(),
            "auth"
        );
        let e7000 = r#"{"errors":[{"error_number":7000,"error":"Unable to connect to database"}]}"#;
        let err = run("/slurmdb/v0.0.42/jobs", 502, e7000).unwrap();
        assert_eq!(err.label(), "auth");
        assert!(!err.is_transient());
        // The same error off /slurmdb/ is not about credentials.
        assert_eq!(
            run("/slurm/v0.0.42/jobs", 502, e7000).unwrap().label(),
            "rejected"
        );
    }

    #[test]
    fn not_found_forms() {
        assert_eq!(
            run("/slurm/v0.0.39/ping", 404, "").unwrap().label(),
            "not_found"
        );
        let e2017 = r#"{"errors":[{"error_number":2017,"error":"Invalid job id specified"}]}"#;
        let err = run("/slurm/v0.0.42/job/99", 200, e2017).unwrap();
        assert_eq!(err.label(), "not_found");
        assert_eq!(err.slurm_errors()[0].error_number, Some(2017));
    }

    #[test]
    fn rejected_keeps_every_entry() {
        let body = r#"{"errors":[{"error_number":2016,"error":"Invalid partition name specified","description":"x","source":"slurm_submit_batch_job()"},{"error_number":9001,"description":"second"}]}"#;
        for status in [500, 422, 200] {
            let err = run("/slurm/v0.0.42/job/submit", status, body).unwrap();
            assert_eq!(err.label(), "rejected");
            assert_eq!(err.slurm_errors().len(), 2);
            assert_eq!(
                err.slurm_errors()[0].source.as_deref(),
                Some("slurm_submit_batch_job()")
            );
        }
    }

    #[test]
    fn plain_statuses() {
        let err = run("/slurm/v0.0.42/jobs", 400, "Unable to parse query").unwrap();
        assert!(matches!(&err, Error::BadRequest { text, .. } if text == "Unable to parse query"));
        assert_eq!(run("/x", 503, "busy").unwrap().label(), "http_status");
        assert!(run("/x", 503, "busy").unwrap().is_transient());
        assert!(run("/x", 200, r#"{"warnings":[{"description":"w"}]}"#).is_none());
    }
}
