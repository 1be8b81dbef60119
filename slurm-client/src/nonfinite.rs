//! slurmrestd prints non-finite floats as bare `Infinity`, `-Infinity` and `NaN` (seen in
//! `/shares` of Slurm 24.11: `"level": Infinity`), which is not JSON. In such a body,
//! `NaN` becomes `null` and `±Infinity` becomes `±f64::MAX`, which the conversions read as
//! infinite (JSON has no literal for infinity, and `null` would lose it). This is only done
//! for a body that failed to parse (see `transport::read_answer`), so valid bodies — the
//! common case, and the large ones — are never searched for these literals.

const TOKENS: [(&[u8], &[u8]); 3] = [
    (b"-Infinity", b"-1.7976931348623157e308"),
    (b"Infinity", b"1.7976931348623157e308"),
    (b"NaN", b"null"),
];

/// Returns the body with non-finite literals outside strings replaced, or `None` when it has
/// none.
pub(crate) fn sanitize(body: &[u8]) -> Option<Vec<u8>> {
    let infinity = memchr::memmem::find(body, b"Infinity");
    let nan = memchr::memmem::find(body, b"NaN");
    let first = infinity.into_iter().chain(nan).min()?;
    let mut out = Vec::with_capacity(body.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut changed = false;
    // Nothing before the first candidate (or the `-` of `-Infinity` just before it) needs a
    // change, but string state must be tracked from the start.
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            out.push(b);
            i += 1;
            continue;
        }
        if i + 1 >= first {
            if let Some((token, replacement)) =
                TOKENS.iter().find(|(t, _)| body[i..].starts_with(t))
            {
                out.extend_from_slice(replacement);
                i += token.len();
                changed = true;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn bare_non_finite_numbers_become_max_or_null() {
        let body = br#"{"level": Infinity, "x": -Infinity, "y": NaN, "z": [NaN,1]}"#;
        let fixed = sanitize(body).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&fixed).unwrap();
        assert_eq!(value["level"].as_f64(), Some(f64::MAX));
        assert_eq!(value["x"].as_f64(), Some(-f64::MAX));
        assert_eq!(value["y"], serde_json::Value::Null);
        assert!(value["z"][0].is_null());
        assert_eq!(value["z"][1], 1);
    }

    #[test]
    fn strings_and_plain_bodies_are_left_alone() {
        assert!(sanitize(br#"{"name": "Infinity NaN"}"#).is_none());
        assert!(sanitize(br#"{"a": 1.5}"#).is_none());
        let body = br#"{"n": "say \"NaN\"", "v": NaN}"#;
        let value: serde_json::Value = serde_json::from_slice(&sanitize(body).unwrap()).unwrap();
        assert_eq!(value["n"], "say \"NaN\"");
        assert!(value["v"].is_null());
    }
}
