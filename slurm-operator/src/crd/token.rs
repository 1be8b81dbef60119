//! `Token` (`jwt`): a Slurm JWT for a user, kept fresh in a Secret.

use std::time::Duration;

use k8s_openapi::api::core::v1::SecretKeySelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{parse_go_duration, pick_jwt_key_ref, require};

/// Lifetime when `spec.lifetime` is unset.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Secret key of the token when `spec.secretRef` is unset.
pub const DEFAULT_SECRET_KEY: &str = "SLURM_JWT";

super::null::null_means_absent!(TokenSpec, TokenStatus);

// The printer columns repeat `type_`, which the lint takes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "slinky.slurm.net",
    version = "v1beta1",
    kind = "Token",
    plural = "tokens",
    namespaced,
    derive = "PartialEq",
    status = "TokenStatus",
    shortname = "tokens",
    shortname = "jwt",
    printcolumn(
        name = "USER",
        type_ = "string",
        json_path = ".spec.username",
        description = "User the JWT is issued to."
    ),
    printcolumn(
        name = "IAT",
        type_ = "date",
        json_path = ".status.issuedAt",
        description = "When the current JWT was issued."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A Slurm JWT for one user, stored (and refreshed) in a Secret."
)]
#[schemars(extend("x-kubernetes-validations" = [
        {"rule": "has(self.jwtKeyRef) || has(self.jwtHs256KeyRef)", "message": "jwtKeyRef (or the deprecated jwtHs256KeyRef) is required"},
    ]))]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["username"]))]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct TokenSpec {
    /// Deprecated alias of `jwtKeyRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_hs256_key_ref: Option<SecretKeySelector>,
    /// The HS256 signing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_key_ref: Option<SecretKeySelector>,
    /// Slurm user name (`sun` claim).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// Go duration; default 15m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<String>,
    /// Re-issue the token before it expires (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub refresh: Option<bool>,
    /// Where the token is stored; default `<name>-jwt-<username>` / `SLURM_JWT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct TokenStatus {
    /// `iat` of the JWT in the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl TokenSpec {
    /// The JWT signing key: `jwtKeyRef`, else the deprecated `jwtHs256KeyRef`.
    pub fn jwt_key_ref(&self) -> Option<&SecretKeySelector> {
        pick_jwt_key_ref(&self.jwt_key_ref, &self.jwt_hs256_key_ref)
    }

    /// Token lifetime: `spec.lifetime` if it parses and is positive, else 15 minutes.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
            .as_deref()
            .and_then(parse_go_duration)
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_LIFETIME)
    }

    /// Default true.
    pub fn refresh(&self) -> bool {
        self.refresh.unwrap_or(true)
    }

    /// The Secret and key the token goes to (defaults filled in from the Token's name).
    pub fn secret_ref(&self, token_name: &str) -> SecretKeySelector {
        let mut r = self.secret_ref.clone().unwrap_or_default();
        if r.name.is_empty() {
            r.name = format!("{token_name}-jwt-{}", self.username);
        }
        if r.key.is_empty() {
            r.key = DEFAULT_SECRET_KEY.into();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_style_manifest() {
        let t: Token = serde_yaml::from_str(
            r#"
apiVersion: slinky.slurm.net/v1beta1
kind: Token
metadata: {name: slurm-token-slurm, namespace: slurm}
spec:
  jwtHs256KeyRef: {name: slurm-auth-jwt, key: jwt.key}
  username: slurm
  lifetime: 1h
status:
  issuedAt: "2026-08-01T00:00:00Z"
"#,
        )
        .unwrap();
        let s = &t.spec;
        assert_eq!(s.jwt_key_ref().unwrap().name, "slurm-auth-jwt");
        assert_eq!(s.lifetime(), Duration::from_secs(3600));
        assert!(s.refresh());
        let r = s.secret_ref("slurm-token-slurm");
        assert_eq!(
            (r.name.as_str(), r.key.as_str()),
            ("slurm-token-slurm-jwt-slurm", "SLURM_JWT")
        );
        assert!(t.status.unwrap().issued_at.is_some());
    }

    #[test]
    fn defaults_and_overrides() {
        let s: TokenSpec = serde_yaml::from_str("username: alice").unwrap();
        assert_eq!(s.lifetime(), DEFAULT_LIFETIME);
        assert!(s.jwt_key_ref().is_none());
        let s: TokenSpec = serde_yaml::from_str(
            "username: alice\nlifetime: bogus\nrefresh: false\njwtKeyRef: {name: new, key: k}\njwtHs256KeyRef: {name: old, key: k}\nsecretRef: {name: mine, key: TOKEN}",
        )
        .unwrap();
        assert_eq!(s.lifetime(), DEFAULT_LIFETIME);
        assert!(!s.refresh());
        assert_eq!(s.jwt_key_ref().unwrap().name, "new");
        let r = s.secret_ref("t");
        assert_eq!((r.name.as_str(), r.key.as_str()), ("mine", "TOKEN"));
        let s: TokenSpec =
            serde_yaml::from_str("username: bob\nlifetime: 0s\nsecretRef: {name: only-name}")
                .unwrap();
        assert_eq!(s.lifetime(), DEFAULT_LIFETIME);
        assert_eq!(s.secret_ref("t").key, "SLURM_JWT");
    }
}
