//! Decoding answer bodies, reporting the JSON path of whatever does not match.

use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::envelope::{Envelope, RawEnvelope, capture};
use crate::error::Error;

/// How many bytes of body are shown on either side of a decoding problem.
const EXCERPT_RADIUS: usize = 60;

/// Decodes `body` as `T`, reading the envelope (`errors[]`, `warnings[]`, `meta`) in the
/// same pass. An empty body decodes as JSON `null` (so `()` and `Option` accept it).
pub(crate) fn decode<T: DeserializeOwned>(
    method: &Method,
    path: &str,
    body: &[u8],
) -> Result<(T, Envelope), Error> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"null"
    } else {
        body
    };
    // Checking UTF-8 once for the whole body is much cheaper than string by string; a body
    // that is not UTF-8 takes the slow path, which says where.
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(explain::<T>(method, path, body));
    };
    // The common case runs without tracking the JSON path (which costs a good part of the
    // decoding time); a body that fails is decoded again with it, to say where it failed.
    let mut raw = RawEnvelope::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let fast = T::deserialize(capture(&mut de, &mut raw)).and_then(|value| {
        de.end()?;
        Ok(value)
    });
    match fast {
        Ok(value) => Ok((value, Envelope::from_raw(raw))),
        Err(_) => Err(explain::<T>(method, path, body)),
    }
}

/// The decoding error for a body that failed, naming the JSON path of the failure.
#[cold]
fn explain<T: DeserializeOwned>(method: &Method, path: &str, body: &[u8]) -> Error {
    let fail = |json_path: String, inner: serde_json::Error| Error::Decode {
        method: method.clone(),
        path: path.to_string(),
        json_path,
        excerpt: excerpt(body, inner.line(), inner.column()),
        message: inner.to_string(),
    };
    let mut raw = RawEnvelope::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize::<_, T>(capture(&mut de, &mut raw)) {
        Err(e) => {
            let json_path = e.path().to_string();
            fail(json_path, e.into_inner())
        }
        Ok(_) => match de.end() {
            Err(e) => fail("(after the end)".into(), e),
            // Cannot happen: the same bytes failed a moment ago.
            Ok(()) => Error::Decode {
                method: method.clone(),
                path: path.to_string(),
                json_path: ".".into(),
                message: "the body failed to decode once but not the second time".into(),
                excerpt: head(body),
            },
        },
    }
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
