//! A Token cannot take over a Secret that is not its own (issue 38, point 1): a user who may
//! create Tokens but not write Secrets must not be able to replace a key of, or have garbage
//! collection delete, another Secret of the namespace by naming it in `spec.secretRef`.
//!
//! One namespace, no Slurm: Secret `victim`, then a Token `thief` naming it, refused by the
//! webhook (which runs in this process, as in [`crate::webhook`]); with the webhook's
//! configuration gone, the Token is stored and the operator (started without a webhook) sets
//! `Synced=False` naming the Secret and leaves it as it was (data, owner references, managed
//! fields). A Token `mine` beside it gets its Secret, so the operator was at work; deleting both
//! Tokens garbage-collects `mine`'s Secret (the collector runs) and leaves `victim`.

use std::time::{Duration, Instant};

use slurm_operator::webhook::WebhookArgs;

use crate::common::{TestEnv, ground};
use crate::webhook::{Webhook, ensure_crds};

const LIMIT: Duration = Duration::from_secs(60);

const THIEF: &str = "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata:\n  name: thief\n\
     spec:\n  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}\n  username: slurm\n  \
     secretRef: {name: victim, key: SLURM_JWT}\n";

const MINE: &str = "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata:\n  name: mine\n\
     spec:\n  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}\n  username: slurm\n";

/// What must not change of `victim`: its data, owner references and managed fields.
fn victim(env: &TestEnv) -> String {
    let out = ground().ok(&[
        "get",
        "-n",
        env.name(),
        "secret/victim",
        "-o",
        "jsonpath={.data}|{.metadata.ownerReferences}|{.metadata.managedFields}|{.metadata.resourceVersion}",
    ]);
    assert!(!out.is_empty(), "no Secret victim");
    out
}

#[test]
fn a_token_cannot_take_over_another_secret() {
    ensure_crds();
    let mut env = TestEnv::new("op-token-secret");
    let g = ground();
    // "precious" and "other", base64.
    g.apply(
        env.name(),
        "apiVersion: v1\nkind: Secret\nmetadata: {name: victim}\n\
         data: {SLURM_JWT: cHJlY2lvdXM=, other: b3RoZXI=}\n",
    );
    let before = victim(&env);

    let webhook = Webhook::start(
        &env,
        None,
        WebhookArgs {
            webhook_self_signed: true,
            ..WebhookArgs::default()
        },
    );
    webhook.wait_ready(&env);
    let out = g.kubectl(&["apply", "-n", env.name(), "-f", "-"], Some(THIEF));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("denied the request: spec.secretRef.name: Secret \"victim\" already exists and is not this Token's (it has no controller)"),
        "the webhook let the Token through: {err}"
    );

    // The webhook off (its configuration gone): the API server stores the Token.
    drop(webhook);
    let deadline = Instant::now() + LIMIT;
    loop {
        let out = g.kubectl(&["apply", "-n", env.name(), "-f", "-"], Some(THIEF));
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Token is still refused without the webhook's configuration: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    g.apply(env.name(), MINE);

    env.start_operator(&["--webhook-addr", "0"]);
    let synced = "{.status.conditions[?(@.type==\"Synced\")]}";
    let condition = env.wait_for("token/thief", synced, LIMIT, |c| {
        c.contains("\"status\":\"False\"")
    });
    assert!(
        condition.contains("\"reason\":\"ReferenceFailed\"")
            && condition.contains("spec.secretRef.name: Secret \\\"victim\\\" already exists"),
        "{condition}"
    );
    // The operator works: the other Token's Secret is made, and owned by it.
    env.wait_for(
        "secret/mine-jwt-slurm",
        "{.metadata.ownerReferences[0].kind}",
        LIMIT,
        |k| k == "Token",
    );
    assert_eq!(victim(&env), before, "victim was written");

    // Deleting the Tokens: the collector takes `mine`'s Secret, never `victim`.
    g.ok(&[
        "delete",
        "-n",
        env.name(),
        "token/thief",
        "token/mine",
        "--wait=true",
    ]);
    let deadline = Instant::now() + LIMIT;
    while !g
        .get(env.name(), "secret/mine-jwt-slurm", "{.metadata.name}")
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the garbage collector never deleted mine-jwt-slurm"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        victim(&env),
        before,
        "victim changed or went with the Token"
    );
}
