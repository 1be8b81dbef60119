//! LoginSet (`sackd`): the login Deployment and Service `N`, the `N-ssh-config` ConfigMap, and
//! the immutable `N-ssh-host-keys` Secret — generated once when missing and never rewritten, so
//! users' `known_hosts` stay valid across rollouts and operator restarts. `status.replicas` and
//! `status.selector` (the scale subresource) follow the Deployment.
//!
//! Host keys: RSA ([`RSA_BITS`] bits), Ed25519 and ECDSA P-256, private keys in the OpenSSH
//! format (unencrypted, as sshd reads them), public keys as `authorized_keys`-style lines,
//! generated on a blocking thread.
//! Key material never reaches a log, an event or an error message.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller as Runner};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::adopt::{self, Held};
use super::apply::{FIELD_MANAGER, apply};
use super::conditions;
use super::restapi::controller_of;
use super::{Context, Error, secrets};
use crate::crd::LoginSet;
use crate::render::{self, labels};

/// Size of the generated RSA host key: 3072 bits (ssh-keygen's default). The workspace builds
/// the big-number crates optimised in debug builds too, so tests pay about a second for it.
pub const RSA_BITS: usize = 3072;

/// Watches LoginSets in the context's scope, their children, their Controllers and their
/// `sssdConfRef` Secrets.
pub async fn run(ctx: Arc<Context>) {
    let cache = &ctx.cache;
    let by_controller = cache.loginsets.store();
    let by_secret = cache.loginsets.store();
    let runner = Runner::for_stream(cache.loginsets.subscribe(), cache.loginsets.store())
        .owns_stream(cache.deployments.subscribe())
        .owns_stream(cache.services.subscribe())
        .owns_stream(cache.config_maps.subscribe())
        .owns_stream(cache.secrets.subscribe())
        .watches_stream(cache.controllers.subscribe(), move |c| {
            by_controller
                .state()
                .iter()
                .filter(|l| {
                    l.namespace() == c.namespace() && l.spec.controller_ref.name == c.name_any()
                })
                .map(|l| ObjectRef::from_obj(&**l))
                .collect::<Vec<_>>()
        })
        .watches_stream(cache.secrets.subscribe(), move |s| {
            by_secret
                .state()
                .iter()
                .filter(|l| {
                    l.namespace() == s.namespace() && l.spec.sssd_conf_ref.name == s.name_any()
                })
                .map(|l| ObjectRef::from_obj(&**l))
                .collect::<Vec<_>>()
        });
    super::run("loginset", runner, ctx, reconcile).await;
}

async fn reconcile(loginset: Arc<LoginSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    if loginset.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let result = sync(&loginset, &ctx).await;
    let wanted = adopt::conditions(&ctx, &*loginset, result.as_deref()).await;
    conditions::set(&ctx, &*loginset, &wanted).await?;
    result.map(|_| Action::requeue(Duration::from_secs(600)))
}

/// The workloads another operator made that were left as they are (see [`adopt`]).
async fn sync(loginset: &LoginSet, ctx: &Context) -> Result<Vec<Held>, Error> {
    let ns = loginset.namespace().ok_or(Error::Unnamed)?;
    let name = loginset.name_any();
    let controller = controller_of(ctx, &ns, &loginset.spec.controller_ref.name)?;
    let mut secrets_read = vec![host_keys(loginset, ctx, &ns).await?];
    let sssd = &loginset.spec.sssd_conf_ref;
    if sssd.name.is_empty() {
        return Err(Error::InvalidSpec("spec.sssdConfRef.name is empty".into()));
    }
    secrets::key(ctx, &ns, sssd, "spec.sssdConfRef").await?;
    secrets_read.push(secrets::secret(ctx, &ns, &sssd.name, "spec.sssdConfRef").await?);

    let children =
        render::loginset::render(loginset, &controller, &secrets_read, &ctx.cluster_domain)?;
    apply(ctx, children.config_map).await?;
    apply(ctx, children.service).await?;
    let held = adopt::apply_workload(ctx, loginset, children.deployment).await?;
    status(loginset, ctx, &ns, &name).await?;
    Ok(held.into_iter().collect())
}

/// The `N-ssh-host-keys` Secret: read, or generated and created when missing. An existing one
/// is never changed (it is immutable), whatever it holds.
async fn host_keys(loginset: &LoginSet, ctx: &Context, ns: &str) -> Result<Secret, Error> {
    let name = render::loginset::host_keys_name(&loginset.name_any());
    if let Some(secret) = secrets::read(ctx, ns, &name).await? {
        return Ok((*secret).clone());
    }
    // Direct before generating: the store may not hold the keys created a moment ago.
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    if let Some(secret) = api.get_opt(&name).await? {
        return Ok(secret);
    }
    let comment = format!("{name}@{ns}");
    let data = tokio::task::spawn_blocking(move || generate_host_keys(&comment))
        .await
        .map_err(|e| Error::InvalidSpec(format!("ssh host key generation stopped: {e}")))?
        .map_err(|e| Error::InvalidSpec(format!("cannot generate ssh host keys: {e}")))?;
    let meta = render::child_meta(
        name.clone(),
        ns,
        render::merge_maps([
            &loginset.metadata.labels.clone().unwrap_or_default(),
            &labels::component_labels(labels::Component::Login, &loginset.name_any()),
        ]),
        BTreeMap::new(),
        vec![render::controller_ref(loginset)?],
    );
    let secret = Secret {
        metadata: meta,
        immutable: Some(true),
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Default::default()
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, &secret).await {
        Ok(created) => {
            ctx.event(
                loginset,
                false,
                "HostKeysCreated",
                "CreateSshHostKeys",
                format!("generated ssh host keys (RSA {RSA_BITS}, Ed25519, ECDSA P-256) in Secret {name}"),
            )
            .await;
            Ok(created)
        }
        // Someone (an earlier reconcile, another replica) was first: theirs stays.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(api.get(&name).await?),
        Err(e) => Err(e.into()),
    }
}

/// The six `ssh_host_{rsa,ed25519,ecdsa}_key[.pub]` entries, freshly generated.
pub fn generate_host_keys(comment: &str) -> Result<BTreeMap<String, ByteString>, ssh_key::Error> {
    use ssh_key::private::{KeypairData, RsaKeypair};
    use ssh_key::rand_core::OsRng;
    use ssh_key::{Algorithm, EcdsaCurve, LineEnding, PrivateKey};

    let mut rng = OsRng;
    let keys = [
        (
            "rsa",
            PrivateKey::new(
                KeypairData::from(RsaKeypair::random(&mut rng, RSA_BITS)?),
                comment,
            )?,
        ),
        ("ed25519", PrivateKey::random(&mut rng, Algorithm::Ed25519)?),
        (
            "ecdsa",
            PrivateKey::random(
                &mut rng,
                Algorithm::Ecdsa {
                    curve: EcdsaCurve::NistP256,
                },
            )?,
        ),
    ];
    let mut data = BTreeMap::new();
    for (kind, mut key) in keys {
        key.set_comment(comment);
        let private = key.to_openssh(LineEnding::LF)?;
        data.insert(
            format!("ssh_host_{kind}_key"),
            ByteString(private.as_bytes().to_vec()),
        );
        let public = key.public_key().to_openssh()?;
        data.insert(
            format!("ssh_host_{kind}_key.pub"),
            ByteString(format!("{public}\n").into_bytes()),
        );
    }
    Ok(data)
}

/// `status.replicas` from the Deployment and `status.selector` for the scale subresource,
/// written only when they change.
async fn status(loginset: &LoginSet, ctx: &Context, ns: &str, name: &str) -> Result<(), Error> {
    let replicas = ctx
        .cache
        .deployments
        .get(ns, name)
        .and_then(|d| d.status.clone())
        .and_then(|s| s.replicas)
        .unwrap_or(0);
    let selector =
        labels::selector_string(&labels::selector_labels(labels::Component::Login, name));
    let current = loginset.status.clone().unwrap_or_default();
    if current.replicas == replicas && current.selector == selector {
        return Ok(());
    }
    let api: Api<LoginSet> = Api::namespaced(ctx.client.clone(), ns);
    api.patch_status(
        name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({ "status": { "replicas": replicas, "selector": selector } })),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::loginset::HOST_KEY_FILES;

    #[test]
    fn host_keys_in_openssh_formats() {
        let data = generate_host_keys("login-ssh-host-keys@ns").unwrap();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        let mut want = HOST_KEY_FILES.to_vec();
        want.sort();
        assert_eq!(keys, want);
        let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
        for kind in ["rsa", "ed25519", "ecdsa"] {
            let private = text(&format!("ssh_host_{kind}_key"));
            assert!(private.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
            assert!(
                private
                    .trim_end()
                    .ends_with("-----END OPENSSH PRIVATE KEY-----")
            );
            let parsed = ssh_key::PrivateKey::from_openssh(&private).unwrap();
            assert!(!parsed.is_encrypted());
            let public = text(&format!("ssh_host_{kind}_key.pub"));
            assert!(public.ends_with(" login-ssh-host-keys@ns\n"), "{public}");
            assert_eq!(
                ssh_key::PublicKey::from_openssh(public.trim_end()).unwrap(),
                *parsed.public_key()
            );
        }
        assert!(text("ssh_host_rsa_key.pub").starts_with("ssh-rsa "));
        assert!(text("ssh_host_ed25519_key.pub").starts_with("ssh-ed25519 "));
        assert!(text("ssh_host_ecdsa_key.pub").starts_with("ecdsa-sha2-nistp256 "));
    }
}
