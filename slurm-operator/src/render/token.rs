//! The Secret a Token writes its JWT into.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use secrecy::{ExposeSecret, SecretString};

use super::{RenderError, child_meta, controller_ref, cr_annotations, cr_labels};
use crate::crd::Token;

/// The Token's Secret: `spec.secretRef.name` (default `<token>-jwt-<username>`), key
/// `spec.secretRef.key` (default `SLURM_JWT`) holding `jwt`; immutable when `refresh` is false.
///
/// Owner: the Token (Slinky makes the JWT signing-key Secret the owner instead, so its token
/// Secrets outlive the Token; we follow the rule that every child belongs to its resource).
pub fn secret(token: &Token, jwt: &SecretString) -> Result<Secret, RenderError> {
    let location = token.spec.secret_ref(&token.name_any());
    let namespace = token.namespace().unwrap_or_default();
    let data = BTreeMap::from([(
        location.key,
        ByteString(jwt.expose_secret().as_bytes().to_vec()),
    )]);
    Ok(Secret {
        metadata: child_meta(
            location.name,
            &namespace,
            cr_labels(&token.metadata),
            cr_annotations(&token.metadata),
            vec![controller_ref(token)?],
        ),
        data: Some(data),
        immutable: (!token.spec.refresh()).then_some(true),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::test_support::with_meta;

    #[test]
    fn default_name_and_key() {
        let token: Token = with_meta(
            "tok",
            serde_json::json!({"username": "alice", "jwtKeyRef": {"name": "jwt", "key": "jwt.key"}}),
        );
        let s = secret(&token, &"abc.def".into()).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("tok-jwt-alice"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("slurm"));
        assert_eq!(s.data.unwrap()["SLURM_JWT"].0, b"abc.def");
        assert_eq!(s.immutable, None);
        let owner = &s.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("Token", Some(true))
        );
    }

    #[test]
    fn explicit_ref_and_no_refresh() {
        let token: Token = with_meta(
            "tok",
            serde_json::json!({
                "username": "alice",
                "refresh": false,
                "secretRef": {"name": "out", "key": "TOKEN"},
            }),
        );
        let s = secret(&token, &"x".into()).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("out"));
        assert!(s.data.unwrap().contains_key("TOKEN"));
        assert_eq!(s.immutable, Some(true));
    }
}
