//! One pure validation per kind: `validate_<kind>(new, old, lookups) -> Verdict`, `old` being
//! the stored object on UPDATE and `None` on CREATE. Slinky's rules, plus ours where Slinky
//! would let through a manifest that cannot work (each marked "ours" in its module).
//!
//! An object being deleted (`deletionTimestamp` set) is always allowed: the updates it still
//! gets are finalizer removals, which must not fail because, say, a referenced ConfigMap went
//! away first.

mod accounting;
mod conf;
mod controller;
mod loginset;
mod nodeset;
mod restapi;
mod token;

pub use accounting::validate_accounting;
pub use controller::validate_controller;
pub use loginset::validate_loginset;
pub use nodeset::validate_nodeset;
pub use restapi::validate_restapi;
pub use token::validate_token;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::verdict::Findings;
use crate::crd::ServiceSpec;

fn being_deleted(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// Kubernetes does not guard `externalIPs` (CVE-2020-8554: whoever sets them can intercept
/// traffic to those addresses); the operator drops them from the Services it makes.
fn warn_external_ips(f: &mut Findings, field: &str, service: &ServiceSpec) {
    if service
        .spec
        .get("externalIPs")
        .is_some_and(|v| !v.is_null())
    {
        f.warn(
            format!("{field}.spec.externalIPs"),
            "externalIPs are not applied to the Service (CVE-2020-8554)",
        );
    }
}

/// The reasons `name` is not a DNS-1123 subdomain (lower-case alphanumerics, `-` and `.`,
/// starting and ending alphanumeric, each label too, at most 253 characters); empty when it is.
/// With `prefix`, a trailing `-` is allowed, since something is appended to the name.
fn dns1123_subdomain_errors(name: &str, prefix: bool) -> Vec<String> {
    let masked;
    let name = match name.strip_suffix('-') {
        Some(head) if prefix && !head.is_empty() => {
            masked = format!("{head}a");
            masked.as_str()
        }
        _ => name,
    };
    let mut errors = Vec::new();
    if name.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    let label_ok = |label: &str| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    };
    if !name.split('.').all(label_ok) {
        errors.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character"
                .to_string(),
        );
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_subdomains() {
        for ok in ["a", "slinky", "gpu-0", "a.b-c.d", "x1"] {
            assert!(dns1123_subdomain_errors(ok, false).is_empty(), "{ok}");
        }
        for ok in ["slinky-", "gpu-a100-", "a.b-"] {
            assert!(dns1123_subdomain_errors(ok, true).is_empty(), "{ok}");
        }
        for bad in [
            "", "-", "slinky-", "Gpu", "a_b", "a..b", ".a", "a.", "-a", "a b",
        ] {
            assert!(!dns1123_subdomain_errors(bad, false).is_empty(), "{bad:?}");
        }
        for bad in ["-", "--", "a--.b-", "Gpu-", "a_b-", "a b-"] {
            assert!(!dns1123_subdomain_errors(bad, true).is_empty(), "{bad:?}");
        }
        assert_eq!(
            dns1123_subdomain_errors(&"a".repeat(254), false),
            ["must be no more than 253 characters"]
        );
    }
}
