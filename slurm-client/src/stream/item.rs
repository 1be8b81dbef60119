//! Decoding one element of a streamed listing, with the same care as a whole answer: the
//! fast path first, then the non-finite fix-up (`Infinity`, `NaN`), and for an element that
//! still fails, an [`Error::Decode`] naming its JSON path in the whole answer
//! (`jobs[3].job_state`).

use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::decode::decode;
use crate::error::Error;

/// Decodes `bytes`, element `index` of the top-level array `key` of the answer to
/// `method path`.
pub(crate) fn decode_item<T: DeserializeOwned>(
    method: &Method,
    path: &str,
    key: &str,
    index: usize,
    bytes: &[u8],
) -> Result<T, Error> {
    if let Some(value) = fast::<T>(bytes) {
        return Ok(value);
    }
    // As for a whole answer (see `transport::read_answer`), the fix-up is only tried on an
    // element that failed, so valid elements are never searched for the literals.
    if let Some(value) = crate::nonfinite::sanitize(bytes).and_then(|fixed| fast::<T>(&fixed)) {
        return Ok(value);
    }
    match decode::<T>(method, path, bytes) {
        Ok((value, _)) => Ok(value),
        Err(Error::Decode {
            method,
            path,
            json_path,
            message,
            excerpt,
        }) => Err(Error::Decode {
            method,
            path,
            json_path: item_path(key, index, &json_path),
            message,
            excerpt,
        }),
        Err(other) => Err(other),
    }
}

fn fast<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    let text = std::str::from_utf8(bytes).ok()?;
    serde_json::from_str(text).ok()
}

/// The path inside an element as a path in the whole answer.
fn item_path(key: &str, index: usize, inner: &str) -> String {
    match inner {
        "" | "." => format!("{key}[{index}]"),
        p if p.starts_with('[') => format!("{key}[{index}]{p}"),
        p => format!("{key}[{index}].{p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Job {
        job_id: u32,
        level: Option<f64>,
    }

    fn read(index: usize, body: &str) -> Result<Job, Error> {
        decode_item(
            &Method::GET,
            "/slurm/v0.0.42/jobs/",
            "jobs",
            index,
            body.as_bytes(),
        )
    }

    #[test]
    fn elements_decode_and_non_finite_numbers_are_fixed() {
        assert_eq!(read(0, r#"{"job_id": 7}"#).unwrap().job_id, 7);
        let fixed = read(0, r#"{"job_id": 7, "level": Infinity}"#).unwrap();
        assert_eq!(fixed.level, Some(f64::MAX));
    }

    #[test]
    fn a_mismatch_names_its_path_in_the_whole_answer() {
        let err = read(3, r#"{"job_id": "seven"}"#).unwrap_err();
        let Error::Decode {
            json_path, excerpt, ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(json_path, "jobs[3].job_id");
        assert!(excerpt.contains("seven"), "{excerpt}");
        let Error::Decode { json_path, .. } = read(5, "[1]").unwrap_err() else {
            panic!()
        };
        assert_eq!(json_path, "jobs[5]");
    }
}
