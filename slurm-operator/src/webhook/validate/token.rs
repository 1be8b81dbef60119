//! Token rules: the JWT key ref is immutable (Slinky's); `username` non-empty, `lifetime` a
//! positive duration, and without `secretRef.name` the default Secret name
//! `<token>-jwt-<username>` must be a valid object name (ours: otherwise the token controller
//! can never write the Secret, or silently falls back to 15 minutes).

use super::{being_deleted, dns1123_subdomain_errors};
use crate::crd::{Token, parse_go_duration};
use crate::webhook::verdict::{Findings, Lookups, Verdict};

pub fn validate_token(new: &Token, old: Option<&Token>, _lookups: &Lookups) -> Verdict {
    if being_deleted(&new.metadata) {
        return Verdict::allow();
    }
    let mut f = Findings::default();
    let spec = &new.spec;
    f.immutable(
        "spec.jwtKeyRef",
        spec.jwt_key_ref(),
        old.map(|o| o.spec.jwt_key_ref()),
    );
    f.non_empty("spec.username", &spec.username);
    if let Some(l) = &spec.lifetime {
        match parse_go_duration(l) {
            Some(d) if !d.is_zero() => {}
            _ => f.error(
                "spec.lifetime",
                format!("{l:?} is not a positive duration (e.g. 15m, 1h)"),
            ),
        }
    }
    let explicit = spec.secret_ref.as_ref().is_some_and(|r| !r.name.is_empty());
    if !spec.username.is_empty() && !explicit {
        let name = spec
            .secret_ref(new.metadata.name.as_deref().unwrap_or_default())
            .name;
        if !dns1123_subdomain_errors(&name, false).is_empty() {
            f.error(
                "spec.username",
                format!(
                    "the default Secret name {name:?} is not a valid object name; set spec.secretRef.name"
                ),
            );
        }
    }
    f.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(spec: &str) -> Token {
        serde_yaml::from_str(&format!(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata: {{name: tok, namespace: slurm}}\nspec: {spec}"
        ))
        .unwrap()
    }

    fn check(new: &str, old: Option<&str>) -> Verdict {
        validate_token(&token(new), old.map(token).as_ref(), &Lookups::default())
    }

    const OK: &str = "{jwtKeyRef: {name: jwt, key: jwt.key}, username: slurm}";

    #[test]
    fn rules() {
        assert_eq!(check(OK, None), Verdict::allow());
        assert_eq!(check(OK, Some(OK)), Verdict::allow());
        for spec in [
            "{jwtKeyRef: {name: jwt, key: jwt.key}, username: slurm, lifetime: 1h, refresh: false}",
            "{jwtKeyRef: {name: jwt, key: jwt.key}, username: Admin_User, secretRef: {name: admin-jwt}}",
        ] {
            assert_eq!(check(spec, None), Verdict::allow(), "{spec}");
        }
        for (new, old, msg) in [
            (
                "{jwtKeyRef: {name: other, key: jwt.key}, username: slurm}",
                Some(OK),
                "spec.jwtKeyRef: field is immutable",
            ),
            (
                "{jwtKeyRef: {name: jwt, key: jwt.key}}",
                None,
                "spec.username: must not be empty",
            ),
            (
                "{jwtKeyRef: {name: jwt, key: jwt.key}, username: \"\"}",
                None,
                "spec.username: must not be empty",
            ),
            (
                "{jwtKeyRef: {name: jwt, key: jwt.key}, username: slurm, lifetime: 0s}",
                None,
                "spec.lifetime: \"0s\" is not a positive duration",
            ),
            (
                "{jwtKeyRef: {name: jwt, key: jwt.key}, username: slurm, lifetime: forever}",
                None,
                "spec.lifetime: \"forever\"",
            ),
            (
                "{jwtKeyRef: {name: jwt, key: jwt.key}, username: Admin_User}",
                None,
                "spec.username: the default Secret name \"tok-jwt-Admin_User\" is not a valid object name; set spec.secretRef.name",
            ),
        ] {
            let v = check(new, old);
            assert!(!v.allowed && v.message.contains(msg), "{new}: {v:?}");
        }
    }
}
