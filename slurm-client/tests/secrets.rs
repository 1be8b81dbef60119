//! Tokens and keys never show in `Debug` output or error messages.

use std::time::Duration;

use secrecy::SecretString;
use slurm_client::{
    Client, ClientBuilder, Error, MintedToken, Request, RetryPolicy, StaticToken, TokenFile,
    TokenProvider,
};

const TOKEN: &str = "eyJTOPSECRET.TOKEN-VALUE.sig";
const KEY: &[u8] = b"KEY-MATERIAL-THAT-MUST-NOT-LEAK";

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains(TOKEN), "{what} shows the token: {text}");
    assert!(
        !text.contains("TOPSECRET"),
        "{what} shows part of the token: {text}"
    );
    assert!(
        !text.contains("KEY-MATERIAL"),
        "{what} shows the key: {text}"
    );
}

#[tokio::test]
async fn debug_and_errors_never_show_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, TOKEN).unwrap();
    let key_path = dir.path().join("jwt.key");
    std::fs::write(&key_path, KEY).unwrap();

    let file = TokenFile::new(&token_path);
    file.token().await.unwrap(); // the token is now cached inside
    let minted = MintedToken::from_key_file(&key_path, "root").unwrap();
    minted.token().await.unwrap();
    let fixed = StaticToken::new(TOKEN.to_string());
    for (what, text) in [
        ("TokenFile", format!("{file:?}")),
        ("MintedToken", format!("{minted:?}")),
        ("StaticToken", format!("{fixed:?}")),
        ("SecretString", format!("{:?}", SecretString::from(TOKEN))),
    ] {
        assert_clean(what, &text);
    }

    // Port 1 on loopback refuses connections: a real transport error carrying the request.
    let builder = ClientBuilder::new("http://127.0.0.1:1")
        .token(StaticToken::new(TOKEN.to_string()))
        .user_name("root")
        .client_identity_pem(b"not a cert".to_vec(), KEY.to_vec())
        .retry_policy(RetryPolicy::none())
        .connect_timeout(Duration::from_secs(2));
    assert_clean("ClientBuilder", &format!("{builder:?}"));
    let err = builder.build().unwrap_err();
    assert_clean("identity error", &format!("{err} {err:?}"));

    let client = Client::builder("http://127.0.0.1:1")
        .token(StaticToken::new(TOKEN.to_string()))
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    assert_clean("Client", &format!("{client:?}"));
    let err = client.get_json("/slurm/v0.0.42/ping").await.unwrap_err();
    assert_eq!(err.label(), "transport", "{err}");
    assert_clean("transport error", &format!("{err} {err:?}"));

    // A token that cannot be sent: the error explains without quoting it.
    let bad = format!("{TOKEN}\nsecond line");
    let client = Client::builder("http://127.0.0.1:1")
        .token(StaticToken::new(bad))
        .build()
        .unwrap();
    let err = client
        .request::<serde_json::Value>(Request::get("/x"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Credentials(_)), "{err:?}");
    assert_clean("credentials error", &format!("{err} {err:?}"));

    let err = TokenFile::new(dir.path().join("missing"))
        .token()
        .await
        .unwrap_err();
    assert_clean("token file error", &format!("{err} {err:?}"));
}
