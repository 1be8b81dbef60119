//! Content-coding negotiation: whether a request's `Accept-Encoding` accepts gzip.

/// Whether `Accept-Encoding` values (all of the request's, in order) accept gzip, following
/// RFC 9110 §12.5.3: `gzip` (or its alias `x-gzip`) with a non-zero quality; when neither is
/// named, `*` with a non-zero quality. Names are case-insensitive; a quality that does not
/// parse counts as 0. No header at all means identity.
pub fn accepts_gzip<'a>(values: impl IntoIterator<Item = &'a str>) -> bool {
    let mut gzip: Option<f32> = None;
    let mut any: Option<f32> = None;
    for entry in values.into_iter().flat_map(|v| v.split(',')) {
        let mut parts = entry.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("");
        let mut q = 1.0f32;
        for param in parts {
            if let Some((name, value)) = param.split_once('=')
                && name.trim().eq_ignore_ascii_case("q")
            {
                q = quality(value.trim()).unwrap_or(0.0);
            }
        }
        let slot = if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            &mut gzip
        } else if coding == "*" {
            &mut any
        } else {
            continue;
        };
        *slot = Some(slot.map_or(q, |old| old.max(q)));
    }
    gzip.or(any).is_some_and(|q| q > 0.0)
}

/// A quality value: a number from 0 to 1.
fn quality(text: &str) -> Option<f32> {
    let q: f32 = text.parse().ok()?;
    (0.0..=1.0).contains(&q).then_some(q)
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    fn gzip(header: &str) -> bool {
        accepts_gzip([header])
    }

    #[test]
    fn negotiation() {
        // What Prometheus sends.
        assert!(gzip("gzip"));
        assert!(gzip("GZip"));
        assert!(gzip("x-gzip"));
        assert!(gzip("br, gzip;q=0.5, deflate"));
        assert!(gzip("gzip ; Q=0.001"));
        assert!(gzip("*"));
        assert!(gzip("identity;q=1, *;q=0.2"));
        assert!(!gzip(""));
        assert!(!gzip("identity"));
        assert!(!gzip("br, deflate"));
        assert!(!gzip("gzip;q=0"));
        assert!(!gzip("gzip;q=0.000"));
        assert!(!gzip("gzip;q=nope"));
        assert!(!gzip("gzip;q=2"));
        // An explicit gzip entry wins over `*`.
        assert!(!gzip("*;q=1, gzip;q=0"));
        assert!(gzip("*;q=0, gzip"));
        assert!(!gzip("*;q=0"));
        // Several header lines.
        assert!(accepts_gzip(["br", "gzip"]));
        assert!(!accepts_gzip(std::iter::empty()));
    }
}
