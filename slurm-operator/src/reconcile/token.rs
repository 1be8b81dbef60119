//! Token: an HS256 JWT minted from the referenced key into a Secret, refreshed before it
//! expires. Every path ends with a positive requeue, so the refresh can never stop (the bug of
//! Slinky issue #240, where a non-positive delay dropped the requeue). The Token writes only a
//! Secret it may claim ([`super::token_secret`]), checked before every write.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Api, ResourceExt};
use secrecy::{ExposeSecret, SecretString};
use slurm_client::{JwtClaims, mint_hs256, verify_hs256};

use super::apply::{FIELD_MANAGER, apply, create};
use super::conditions::{self, Wanted};
use super::token_secret::{Claim, claim, refusal};
use super::{Context, Error};
use crate::crd::Token;
use crate::render;

/// The issuer claim of every token the operator mints.
pub const ISSUER: &str = "slurm-operator";

/// What to do with a Token's Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The stored token is good until `refresh_at`.
    Keep {
        /// When to mint the next one.
        refresh_at: u64,
        /// Its issue time.
        issued_at: u64,
    },
    /// Mint a new token (none stored, signed with another key, for another user, or due).
    Mint,
}

/// Decides from the stored token (if any), the key, the user, the lifetime and `now` (seconds).
/// A token is refreshed once four fifths of its lifetime have passed, as Slinky's operator does.
pub fn decide(
    stored: Option<&str>,
    key: &[u8],
    user: &str,
    lifetime: Duration,
    refresh: bool,
    now: u64,
) -> Decision {
    let Some(claims) = stored.and_then(|t| verify_hs256(key, t).ok()) else {
        return Decision::Mint;
    };
    if claims.sun != user {
        return Decision::Mint;
    }
    let margin = lifetime.as_secs() / 5;
    let refresh_at = claims.exp.saturating_sub(margin);
    if refresh && now >= refresh_at {
        return Decision::Mint;
    }
    Decision::Keep {
        refresh_at,
        issued_at: claims.iat,
    }
}

/// The delay until `at`, clamped to `[1 s, lifetime]` so that the requeue is always positive.
pub fn requeue_in(at: u64, now: u64, lifetime: Duration) -> Duration {
    Duration::from_secs(at.saturating_sub(now))
        .clamp(Duration::from_secs(1), lifetime.max(Duration::from_secs(1)))
}

/// A new token for `user`, valid from `now` for `lifetime`.
pub fn mint(key: &[u8], user: &str, lifetime: Duration, now: u64) -> SecretString {
    // Slurm treats exp as a 32-bit time; cap as Slinky does at its "infinite" value.
    let exp = (now + lifetime.as_secs()).min(u64::from(u32::MAX >> 1) - 1);
    let claims = JwtClaims::new(user, Duration::ZERO)
        .issued_at(now)
        .expires_at(exp)
        .not_before(now)
        .issuer(ISSUER)
        .id(uuid::Uuid::new_v4().to_string());
    mint_hs256(key, &claims)
}

/// Watches Tokens (and the Secrets they own) in the context's scope.
pub async fn run(ctx: Arc<Context>) {
    let cache = &ctx.cache;
    let controller = Controller::for_stream(cache.tokens.subscribe(), cache.tokens.store())
        .owns_stream(cache.secrets.subscribe());
    super::run("token", controller, ctx, reconcile).await;
}

async fn reconcile(token: Arc<Token>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = sync(&token, &ctx).await;
    conditions::set(
        &ctx,
        &*token,
        &[Wanted::synced(result.as_ref().map(|_| ()))],
    )
    .await?;
    result
}

async fn sync(token: &Token, ctx: &Context) -> Result<Action, Error> {
    let namespace = token.namespace().ok_or(Error::Unnamed)?;
    let key_ref = token.spec.jwt_key_ref().ok_or_else(|| {
        Error::InvalidSpec("spec.jwtKeyRef (or spec.jwtHs256KeyRef) is required".into())
    })?;
    let key = super::secrets::key(ctx, &namespace, key_ref, "spec.jwtKeyRef").await?;
    let lifetime = token.spec.lifetime();
    let location = token.spec.secret_ref(&token.name_any());
    let (secret_name, secret_key) = (location.name.clone(), location.key.clone());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let refresh = token.spec.refresh();
    let decide_on = |stored: Option<&Secret>| {
        let stored_token = stored
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get(&secret_key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok());
        decide(
            stored_token.as_deref(),
            key.expose_secret(),
            &token.spec.username,
            lifetime,
            refresh,
            now,
        )
    };
    // Whose the Secret is, from the watch (metadata): another's value is never read.
    let watched = ctx.cache.secrets.get(&namespace, &secret_name);
    let mut claim = guard(token, &secret_name, watched.as_ref().map(|s| &s.metadata))?;
    let cached = super::secrets::read(ctx, &namespace, &secret_name).await?;
    let mut decision = decide_on(cached.as_deref());
    if decision == Decision::Mint {
        // Direct before minting: the store may not hold the token minted a moment ago yet, nor
        // a Secret made a moment ago, which the write must not take over.
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
        let live = secrets.get_opt(&secret_name).await?;
        claim = guard(token, &secret_name, live.as_ref().map(|s| &s.metadata))?;
        decision = decide_on(live.as_ref());
    }
    match decision {
        Decision::Keep {
            refresh_at,
            issued_at,
        } => {
            set_issued_at(ctx, token, issued_at).await?;
            if !refresh {
                // Nothing to renew; look again now and then in case the Secret is deleted.
                return Ok(Action::requeue(Duration::from_secs(3600)));
            }
            Ok(Action::requeue(requeue_in(refresh_at, now, lifetime)))
        }
        Decision::Mint => {
            let jwt = mint(key.expose_secret(), &token.spec.username, lifetime, now);
            let secret = render::token::secret(token, &jwt)?;
            if claim == Claim::Absent {
                // A create, not an apply: it fails if the Secret was made since it was read.
                create(ctx, secret).await?;
            } else {
                apply(ctx, secret).await?;
            }
            ctx.event(
                token,
                false,
                "TokenRefreshed",
                "Mint",
                format!(
                    "minted a token for {} into Secret {secret_name}",
                    token.spec.username
                ),
            )
            .await;
            set_issued_at(ctx, token, now).await?;
            let margin = lifetime.as_secs() / 5;
            Ok(Action::requeue(requeue_in(
                now + lifetime.as_secs() - margin,
                now,
                lifetime,
            )))
        }
    }
}

/// The claim of the Token on its Secret (`existing`, by its metadata), or the error that
/// reports a foreign Secret in `Synced=False` (nothing is written then).
fn guard(token: &Token, name: &str, existing: Option<&ObjectMeta>) -> Result<Claim, Error> {
    match claim(token, existing) {
        Claim::Foreign(why) => Err(Error::InvalidReference(format!(
            "{}; nothing was written",
            refusal(token, name, &why)
        ))),
        c => Ok(c),
    }
}

async fn set_issued_at(ctx: &Context, token: &Token, issued_at: u64) -> Result<(), Error> {
    let time = jiff::Timestamp::from_second(issued_at as i64).unwrap_or_default();
    let current = token.status.as_ref().and_then(|s| s.issued_at.as_ref());
    if current.map(|t| t.0.as_second()) == Some(time.as_second()) {
        return Ok(());
    }
    let api: Api<Token> =
        Api::namespaced(ctx.client.clone(), &token.namespace().unwrap_or_default());
    api.patch_status(
        &token.name_any(),
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(serde_json::json!({ "status": { "issuedAt": Time(time) } })),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIFE: Duration = Duration::from_secs(900);

    #[test]
    fn mints_when_missing_foreign_or_due_and_keeps_otherwise() {
        let key = b"key";
        assert_eq!(decide(None, key, "slurm", LIFE, true, 1000), Decision::Mint);
        let t = mint(key, "slurm", LIFE, 1000);
        let t = t.expose_secret();
        assert_eq!(
            decide(Some(t), key, "slurm", LIFE, true, 1000),
            Decision::Keep {
                refresh_at: 1000 + 900 - 180,
                issued_at: 1000
            }
        );
        assert_eq!(
            decide(Some(t), b"rotated", "slurm", LIFE, true, 1000),
            Decision::Mint
        );
        assert_eq!(
            decide(Some(t), key, "alice", LIFE, true, 1000),
            Decision::Mint
        );
        assert_eq!(
            decide(Some(t), key, "slurm", LIFE, true, 1720),
            Decision::Mint
        );
        assert_eq!(
            decide(Some("garbage"), key, "slurm", LIFE, true, 1000),
            Decision::Mint
        );
        // refresh: false keeps even an expired token, as Slinky does.
        assert!(matches!(
            decide(Some(t), key, "slurm", LIFE, false, 99_999),
            Decision::Keep { .. }
        ));
    }

    #[test]
    fn requeue_is_always_positive_and_bounded() {
        assert_eq!(requeue_in(10, 100, LIFE), Duration::from_secs(1));
        assert_eq!(requeue_in(100, 100, LIFE), Duration::from_secs(1));
        assert_eq!(requeue_in(400, 100, LIFE), Duration::from_secs(300));
        assert_eq!(requeue_in(100_000, 100, LIFE), LIFE);
        assert_eq!(
            requeue_in(100_000, 100, Duration::ZERO),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn minted_token_has_slinky_claims() {
        let t = mint(b"k", "bob", LIFE, 5000);
        let c = verify_hs256(b"k", t.expose_secret()).unwrap();
        assert_eq!((c.sun.as_str(), c.iat, c.exp), ("bob", 5000, 5900));
        assert_eq!(c.iss.as_deref(), Some(ISSUER));
        assert!(c.jti.is_some());
    }
}
