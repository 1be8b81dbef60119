//! Which existing Secret a Token may write its token into. `spec.secretRef` is the user's to
//! choose, but writing is the operator's (it may write Secrets; the user may not): left
//! unchecked, a user allowed to create Tokens could overwrite a key of any Secret of the
//! namespace, and deleting the Token would garbage-collect that Secret once the operator had
//! put its controller reference on it. So a Token writes only
//! - a Secret that does not exist yet (it creates it, owned by the Token);
//! - a Secret already its own (a controller reference to this Token's uid);
//! - a token Secret Slinky's operator made for it (controlled by the Token's JWT key Secret, as
//!   Slinky's token builder sets it), which is taken over on adoption as before.
//!
//! The webhook refuses any other Secret, and the token reconciler checks again right before
//! each write (the webhook may be off, or the Secret made after the Token).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use crate::crd::Token;

/// What the Token may do with the Secret its `spec.secretRef` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// No such Secret: the Token creates it.
    Absent,
    /// The Secret is controlled by this Token.
    Own,
    /// A token Secret Slinky made for this Token (controlled by its JWT key Secret).
    Slinky,
    /// Someone else's Secret; the text says whose.
    Foreign(String),
}

impl Claim {
    /// Whether the Token may write the Secret.
    pub fn allowed(&self) -> bool {
        !matches!(self, Claim::Foreign(_))
    }
}

/// Decides from the Token and the existing Secret's metadata (`None`: no such Secret).
pub fn claim(token: &Token, existing: Option<&ObjectMeta>) -> Claim {
    let Some(meta) = existing else {
        return Claim::Absent;
    };
    let Some(controller) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    else {
        return Claim::Foreign("it has no controller".into());
    };
    let uid = token.metadata.uid.as_deref().unwrap_or_default();
    if !uid.is_empty() && controller.uid == uid {
        return Claim::Own;
    }
    if is_key_secret(controller, token) {
        return Claim::Slinky;
    }
    Claim::Foreign(format!(
        "its controller is {} {:?}",
        controller.kind, controller.name
    ))
}

/// Slinky's token Secrets are controlled by the JWT key Secret the Token signs with. Only a
/// writer of Secrets can make such a reference, so it cannot be forged by a Token's author.
fn is_key_secret(owner: &OwnerReference, token: &Token) -> bool {
    owner.api_version == "v1"
        && owner.kind == "Secret"
        && token
            .spec
            .jwt_key_ref()
            .is_some_and(|k| !k.name.is_empty() && k.name == owner.name)
}

/// The field that names the Secret.
pub const FIELD: &str = "spec.secretRef.name";

/// Why the Token may not write Secret `name` (for a [`Claim::Foreign`]), without the field.
pub fn reason(name: &str, why: &str) -> String {
    format!(
        "Secret {name:?} already exists and is not this Token's ({why}); a Token writes only a \
         Secret it creates or one it owns: name another Secret"
    )
}

/// [`reason`] naming the field and the Token.
pub fn refusal(token: &Token, name: &str, why: &str) -> String {
    format!(
        "{FIELD}: {} (Token {}/{})",
        reason(name, why),
        token.namespace().unwrap_or_default(),
        token.name_any()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(uid: Option<&str>) -> Token {
        let mut t: Token = serde_yaml::from_str(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata: {name: tok, namespace: slurm}\n\
             spec: {jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}, username: slurm, secretRef: {name: victim}}",
        )
        .unwrap();
        t.metadata.uid = uid.map(str::to_string);
        t
    }

    fn owner(
        api_version: &str,
        kind: &str,
        name: &str,
        uid: &str,
        controller: bool,
    ) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    fn secret(owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some("victim".into()),
            owner_references: (!owners.is_empty()).then_some(owners),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn absent_own_and_slinky_secrets_are_written() {
        let t = token(Some("u-1"));
        assert_eq!(claim(&t, None), Claim::Absent);
        let own = secret(vec![owner(
            "slinky.slurm.net/v1beta1",
            "Token",
            "tok",
            "u-1",
            true,
        )]);
        assert_eq!(claim(&t, Some(&own)), Claim::Own);
        let slinky = secret(vec![owner("v1", "Secret", "slurm-auth-jwt", "k-1", true)]);
        assert_eq!(claim(&t, Some(&slinky)), Claim::Slinky);
        assert!(Claim::Slinky.allowed() && Claim::Own.allowed() && Claim::Absent.allowed());
    }

    #[test]
    fn any_other_secret_is_foreign() {
        let t = token(Some("u-1"));
        let cases = [
            (secret(vec![]), "it has no controller"),
            // Owned, but not as controller: someone else's object that lists the Token.
            (
                secret(vec![owner(
                    "slinky.slurm.net/v1beta1",
                    "Token",
                    "tok",
                    "u-1",
                    false,
                )]),
                "it has no controller",
            ),
            // Another Token's (same name, earlier incarnation: another uid).
            (
                secret(vec![owner(
                    "slinky.slurm.net/v1beta1",
                    "Token",
                    "tok",
                    "u-0",
                    true,
                )]),
                "its controller is Token \"tok\"",
            ),
            // Controlled by a Secret other than the Token's JWT key.
            (
                secret(vec![owner("v1", "Secret", "other-key", "k-2", true)]),
                "its controller is Secret \"other-key\"",
            ),
            // The key's name under another API group is not a Secret.
            (
                secret(vec![owner(
                    "example.com/v1",
                    "Secret",
                    "slurm-auth-jwt",
                    "k-3",
                    true,
                )]),
                "its controller is Secret \"slurm-auth-jwt\"",
            ),
            (
                secret(vec![owner("apps/v1", "Deployment", "web", "d-1", true)]),
                "its controller is Deployment \"web\"",
            ),
        ];
        for (meta, why) in cases {
            assert_eq!(
                claim(&t, Some(&meta)),
                Claim::Foreign(why.into()),
                "{meta:?}"
            );
        }
        // A Token without a uid (never from the API server) owns nothing.
        let own = secret(vec![owner(
            "slinky.slurm.net/v1beta1",
            "Token",
            "tok",
            "",
            true,
        )]);
        assert!(!claim(&token(None), Some(&own)).allowed());
    }

    #[test]
    fn refusal_names_the_field_and_the_secret() {
        let msg = refusal(&token(None), "victim", "it has no controller");
        assert!(
            msg.starts_with(
                "spec.secretRef.name: Secret \"victim\" already exists and is not this Token's \
                 (it has no controller)"
            ),
            "{msg}"
        );
    }
}
