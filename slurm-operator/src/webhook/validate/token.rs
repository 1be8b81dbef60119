//! Token rules: the JWT key ref is immutable (Slinky's); `username` non-empty, `lifetime` a
//! positive duration, and without `secretRef.name` the default Secret name
//! `<token>-jwt-<username>` must be a valid object name (ours: otherwise the token controller
//! can never write the Secret, or silently falls back to 15 minutes); the Secret it names must
//! not be another's (ours, see [`crate::reconcile::token_secret`]).

use super::{being_deleted, dns1123_subdomain_errors};
use crate::crd::{Token, parse_go_duration};
use crate::reconcile::token_secret::{self, Claim};
use crate::webhook::verdict::{Findings, Lookup, Lookups, Verdict};

pub fn validate_token(new: &Token, old: Option<&Token>, lookups: &Lookups) -> Verdict {
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
    check_secret(&mut f, new, lookups);
    f.verdict()
}

/// The Secret the Token writes must be absent, its own, or Slinky's token Secret for it (ours:
/// see [`token_secret`]). A failed lookup only warns, since the operator checks again before
/// every write.
fn check_secret(f: &mut Findings, token: &Token, lookups: &Lookups) {
    let name = token
        .spec
        .secret_ref(token.metadata.name.as_deref().unwrap_or_default())
        .name;
    match &*Lookups::get(&lookups.secrets, &name) {
        Lookup::NotFound => {}
        Lookup::Found(meta) => {
            if let Claim::Foreign(why) = token_secret::claim(token, Some(meta)) {
                f.error(token_secret::FIELD, token_secret::reason(&name, &why));
            }
        }
        Lookup::Failed(why) => f.warn(
            token_secret::FIELD,
            format!(
                "could not check whose Secret {name:?} is ({why}); the operator checks before \
                 it writes and refuses a Secret that is not the Token's"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn token(spec: &str) -> Token {
        serde_yaml::from_str(&format!(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata: {{name: tok, namespace: slurm}}\nspec: {spec}"
        ))
        .unwrap()
    }

    /// The Token's Secret looked up as `found`.
    fn with_secret(t: &Token, found: Lookup<ObjectMeta>) -> Lookups {
        let name = t.spec.secret_ref("tok").name;
        Lookups {
            secrets: [(name, found)].into(),
            ..Lookups::default()
        }
    }

    fn check(new: &str, old: Option<&str>) -> Verdict {
        let t = token(new);
        validate_token(
            &t,
            old.map(token).as_ref(),
            &with_secret(&t, Lookup::NotFound),
        )
    }

    fn owned_by(kind: &str, name: &str, uid: &str) -> ObjectMeta {
        serde_json::from_value(serde_json::json!({"name": "victim", "ownerReferences": [
            {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": true}
        ]}))
        .unwrap()
    }

    #[test]
    fn secret_of_another_is_refused_naming_the_field() {
        let mut t = token(
            "{jwtKeyRef: {name: jwt, key: jwt.key}, username: slurm, secretRef: {name: victim}}",
        );
        t.metadata.uid = Some("u-1".into());
        let v = validate_token(
            &t,
            None,
            &with_secret(&t, Lookup::Found(ObjectMeta::default())),
        );
        assert!(!v.allowed);
        assert!(
            v.message.starts_with(
                "spec.secretRef.name: Secret \"victim\" already exists and is not this Token's \
                 (it has no controller)"
            ),
            "{v:?}"
        );
        let other = owned_by("Deployment", "web", "d-1");
        let v = validate_token(&t, None, &with_secret(&t, Lookup::Found(other)));
        assert!(
            v.message.contains("its controller is Deployment \"web\""),
            "{v:?}"
        );

        // Its own, and Slinky's token Secret (controlled by the JWT key Secret): allowed.
        for meta in [
            owned_by("Token", "tok", "u-1"),
            owned_by("Secret", "jwt", "k-1"),
        ] {
            let v = validate_token(&t, None, &with_secret(&t, Lookup::Found(meta)));
            assert_eq!(v, Verdict::allow());
        }

        // Not checked: allowed with a warning (the operator checks again before writing).
        for lookups in [
            with_secret(&t, Lookup::Failed("timed out".into())),
            Lookups::default(),
        ] {
            let v = validate_token(&t, None, &lookups);
            assert!(v.allowed, "{v:?}");
            assert_eq!(v.warnings.len(), 1, "{v:?}");
            assert!(
                v.warnings[0]
                    .starts_with("spec.secretRef.name: could not check whose Secret \"victim\" is"),
                "{v:?}"
            );
        }
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
