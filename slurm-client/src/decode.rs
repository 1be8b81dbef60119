//! Decoding answer bodies, reporting the JSON path of whatever does not match.

use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::error::Error;

/// How many bytes of body are shown on either side of a decoding problem.
const EXCERPT_RADIUS: usize = 60;

/// Decodes `body` as `T`. An empty body decodes as JSON `null` (so `()` and `Option`
/// accept it).
pub(crate) fn decode<T: DeserializeOwned>(
    method: &Method,
    path: &str,
    body: &[u8],
) -> Result<T, Error> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"null"
    } else {
        body
    };
    let fail = |json_path: String, inner: serde_json::Error| Error::Decode {
        method: method.clone(),
        path: path.to_string(),
        json_path,
        excerpt: excerpt(body, inner.line(), inner.column()),
        message: inner.to_string(),
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let json_path = e.path().to_string();
        fail(json_path, e.into_inner())
    })?;
    de.end().map_err(|e| fail("(after the end)".into(), e))?;
    Ok(value)
}

/// A short, single-line piece of `body` around `line`:`column` (1-based, as serde_json counts).
pub(crate) fn excerpt(body: &[u8], line: usize, column: usize) -> String {
    let offset = body
        .split(|b| *b == b'\n')
        .take(line.saturating_sub(1))
        .map(|l| l.len() + 1)
        .sum::<usize>()
        + column.saturating_sub(1);
    let offset = offset.min(body.len());
    let start = offset.saturating_sub(EXCERPT_RADIUS);
    let end = (offset + EXCERPT_RADIUS).min(body.len());
    let mut text = String::from_utf8_lossy(&body[start..end]).replace(['\n', '\r', '\t'], " ");
    if start > 0 {
        text.insert(0, '…');
    }
    if end < body.len() {
        text.push('…');
    }
    text
}

/// The start of a body as text, for error messages.
pub(crate) fn head(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(2 * EXCERPT_RADIUS)]);
    let mut text = text.trim().replace(['\n', '\r', '\t'], " ");
    if body.len() > 2 * EXCERPT_RADIUS {
        text.push('…');
    }
    if text.is_empty() {
        "(empty body)".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Jobs {
        jobs: Vec<Job>,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Job {
        job_id: u32,
    }

    #[test]
    fn decode_error_names_json_path_and_request() {
        let body = br#"{"jobs": [{"job_id": 1}, {"job_id": "two"}]}"#;
        let err = decode::<Jobs>(&Method::GET, "/slurm/v0.0.42/jobs", body).unwrap_err();
        let Error::Decode {
            json_path, excerpt, ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(json_path, "jobs[1].job_id");
        assert!(excerpt.contains("\"two\""), "{excerpt}");
        let text = err.to_string();
        assert!(
            text.contains("GET /slurm/v0.0.42/jobs") && text.contains("jobs[1].job_id"),
            "{text}"
        );
    }

    #[test]
    fn truncated_body_is_a_decode_error() {
        let err =
            decode::<Jobs>(&Method::GET, "/x", br#"{"jobs": [{"job_id": 1}, {"jo"#).unwrap_err();
        assert_eq!(err.label(), "decode");
    }

    #[test]
    fn trailing_garbage_and_empty_body() {
        assert!(decode::<serde_json::Value>(&Method::GET, "/x", b"{} x").is_err());
        decode::<()>(&Method::GET, "/x", b"").unwrap();
    }

    #[test]
    fn excerpt_is_short_and_single_line() {
        let body = format!("{{\n\"a\": \"{}\",\n \"b\": x}}", "y".repeat(500));
        let e = excerpt(body.as_bytes(), 3, 7);
        assert!(
            e.len() < 2 * EXCERPT_RADIUS + 10 && !e.contains('\n'),
            "{e}"
        );
        assert!(e.contains("\"b\": x"), "{e}");
    }
}
