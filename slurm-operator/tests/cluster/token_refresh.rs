//! A short-lived Token refreshed on the ground, as a user's REST client sees it: the Secret the
//! operator writes is copied into a file whenever it changes (what the kubelet does for a
//! mounted Secret), and a client reading that file with `slurm_client::TokenFile` asks
//! slurmrestd every second. It starts with slurmrestd and runs beside the rest of the cluster
//! test, so it costs only the wait at [`Follower::finish`] when the refreshes have not all
//! come by then. It counts from the client's first answer (slurmctld may still be starting):
//! the token in the file then, and two refreshes after it.
//!
//! Checked: every token is new (different text, `jti`, later `iat`), each replaced the one
//! before while that one was still valid, every request from the first answer on succeeded,
//! and after each refresh a request succeeded once the previous token had expired (so the
//! client really moved on).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use slurm_client::{Client, JwtClaims, TokenFile, verify_hs256};

use crate::common::{TestEnv, ground};

/// The Token, with a lifetime short enough for two refreshes to come while the rest of the
/// cluster test runs (the CRD, like Slinky's, sets no minimum): refreshed every 32 s (four
/// fifths), 8 s before it expires, which leaves the operator and this test's 1 s poll of the
/// Secret several seconds on a loaded machine.
pub const TOKEN: &str = "slurm-token-short";
const LIFETIME: &str = "40s";
const LIFETIME_SECS: u64 = 40;
const SECRET: &str = "slurm-token-short-jwt-slurm";
/// Refreshes to watch after the first token.
const REFRESHES: usize = 2;
/// How often the Secret is read (the kubelet's sync is slower; the margin is 8 s).
const SECRET_POLL: Duration = Duration::from_secs(1);
/// How often the client asks slurmrestd.
const REQUEST_EVERY: Duration = Duration::from_secs(1);
/// How long the refreshes may take: the first token's rest, two lifetimes' worth, slack.
const LIMIT: Duration = Duration::from_secs(240);

/// The Token, applied with the cluster.
pub fn manifest() -> String {
    format!(
        "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata:\n  name: {TOKEN}\nspec:\n  \
         jwtKeyRef: {{name: slurm-auth-jwt, key: jwt.key}}\n  username: slurm\n  lifetime: {LIFETIME}\n"
    )
}

/// A token as the Secret held it, and when the test first saw it there.
struct Seen {
    claims: JwtClaims,
    token: String,
    at: f64,
}

/// One request's outcome.
struct Request {
    at: f64,
    error: Option<(String, String)>,
}

/// The file follower and the client, running in threads of their own.
pub struct Follower {
    stop: Arc<AtomicBool>,
    secret: std::thread::JoinHandle<Vec<Seen>>,
    requests: std::thread::JoinHandle<Vec<Request>>,
    dir: PathBuf,
}

/// Whether the client has had its first answer.
type Ready = Arc<AtomicBool>;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn read_secret(ns: &str) -> Option<String> {
    let b64 = ground().get(ns, &format!("secret/{SECRET}"), "{.data.SLURM_JWT}");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    String::from_utf8(raw).ok().filter(|t| !t.is_empty())
}

impl Follower {
    /// Starts following the Token's Secret and asking slurmrestd (at `restapi`, an address on
    /// this machine) with what it holds.
    pub fn start(env: &TestEnv, restapi: std::net::SocketAddr) -> Follower {
        let ns = env.name().to_owned();
        let key = env.jwt_key.clone().into_bytes();
        let dir = std::env::temp_dir().join(format!("op-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("SLURM_JWT");
        let first = env.wait_for(
            &format!("secret/{SECRET}"),
            "{.data.SLURM_JWT}",
            LIMIT,
            |v| !v.is_empty(),
        );
        assert!(!first.is_empty());
        let stop = Arc::new(AtomicBool::new(false));
        let ready: Ready = Arc::new(AtomicBool::new(false));

        let secret = {
            let (stop, ready, file) = (stop.clone(), ready.clone(), file.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + LIMIT;
                let mut seen: Vec<Seen> = Vec::new();
                // The token in the file when the client first got an answer: the others
                // before it are dropped.
                let mut base: Option<usize> = None;
                // After the last refresh: until the token before it has expired, and 3 s more.
                let mut done_after: Option<f64> = None;
                loop {
                    if done_after.is_some_and(|t| now() > t) || Instant::now() > deadline {
                        break;
                    }
                    if base.is_none() && ready.load(Ordering::Relaxed) {
                        base = Some(seen.len() - 1);
                    }
                    if let Some(token) = read_secret(&ns)
                        && seen.last().is_none_or(|s| s.token != token)
                    {
                        let at = now();
                        // As the kubelet updates a mounted Secret: a new file, renamed over.
                        let tmp = file.with_extension("new");
                        std::fs::write(&tmp, &token).unwrap();
                        std::fs::rename(&tmp, &file).unwrap();
                        let claims = verify_hs256(&key, &token)
                            .unwrap_or_else(|e| panic!("the Secret's token does not verify: {e}"));
                        eprintln!(
                            "token refresh: token {} seen at +{:.0}s (iat {}, exp {}){}",
                            seen.len(),
                            at - seen.first().map_or(at, |s| s.at),
                            claims.iat,
                            claims.exp,
                            if base.is_none() {
                                ", before the client's first answer"
                            } else {
                                ""
                            }
                        );
                        seen.push(Seen { claims, token, at });
                        if let Some(base) = base
                            && seen.len() == base + 1 + REFRESHES
                        {
                            done_after = Some(seen[seen.len() - 2].claims.exp as f64 + 3.0);
                        }
                    }
                    std::thread::sleep(SECRET_POLL);
                }
                stop.store(true, Ordering::Relaxed);
                seen.split_off(base.unwrap_or(seen.len()))
            })
        };

        let requests = {
            let (stop, ready, file) = (stop.clone(), ready, file);
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    // The first token is in the file once the follower has read the Secret.
                    while !file.exists() && !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    let client = Client::builder(format!("http://{restapi}"))
                        .token(TokenFile::new(&file))
                        .build()
                        .unwrap();
                    // slurmrestd is up; slurmctld may not be yet.
                    while !stop.load(Ordering::Relaxed)
                        && client.list_nodes(&Default::default()).await.is_err()
                    {
                        tokio::time::sleep(REQUEST_EVERY).await;
                    }
                    ready.store(true, Ordering::Relaxed);
                    let mut out = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let at = now();
                        let r = client.list_nodes(&Default::default()).await;
                        out.push(Request {
                            at,
                            error: r.err().map(|e| (e.label().to_owned(), e.to_string())),
                        });
                        tokio::time::sleep(REQUEST_EVERY).await;
                    }
                    out
                })
            })
        };
        Follower {
            stop,
            secret,
            requests,
            dir,
        }
    }

    /// Waits until the refreshes were seen and checks them; returns how long it waited.
    pub fn finish(self) -> Duration {
        let waited = Instant::now();
        let seen = self.secret.join().expect("the Secret follower panicked");
        self.stop.store(true, Ordering::Relaxed);
        let requests = self.requests.join().expect("the REST client panicked");
        let waited = waited.elapsed();
        let _ = std::fs::remove_dir_all(&self.dir);

        assert!(
            seen.len() > REFRESHES,
            "{} refreshes of Token {TOKEN} (lifetime {LIFETIME}) seen within {LIMIT:?} after the client's first answer, want {REFRESHES}",
            seen.len().saturating_sub(1)
        );
        for pair in seen.windows(2) {
            let (old, new) = (&pair[0], &pair[1]);
            // Not assert_ne!: on failure it would print the tokens.
            assert!(old.token != new.token, "a refresh kept the same token");
            assert_ne!(old.claims.jti, new.claims.jti, "a refresh reused the jti");
            assert!(
                new.claims.iat > old.claims.iat,
                "a refresh is not newer: iat {} after {}",
                new.claims.iat,
                old.claims.iat
            );
            assert_eq!(
                new.claims.exp - new.claims.iat,
                LIFETIME_SECS,
                "lifetime {LIFETIME}"
            );
            assert!(
                new.at < old.claims.exp as f64,
                "token replaced at {:.1}, after the old one expired at {}",
                new.at,
                old.claims.exp
            );
            // The client moved on: a request succeeded after the old token expired.
            assert!(
                requests
                    .iter()
                    .any(|r| r.error.is_none() && r.at > old.claims.exp as f64 + 0.5),
                "no request succeeded after the token that expired at {} (all {})",
                old.claims.exp,
                requests.len()
            );
        }
        let failed: Vec<&Request> = requests.iter().filter(|r| r.error.is_some()).collect();
        let start = seen[0].at;
        assert!(
            failed.is_empty(),
            "{} of {} requests with the refreshed tokens failed:\n{}",
            failed.len(),
            requests.len(),
            failed
                .iter()
                .map(|r| {
                    let (kind, text) = r.error.as_ref().unwrap();
                    format!("+{:.1}s {kind}: {text}", r.at - start)
                })
                .collect::<Vec<_>>()
                .join("\n")
        );
        eprintln!(
            "token refresh: {REFRESHES} refreshes of a {LIFETIME} token, each {:.0}s or more before \
             the old one expired; {} requests, all answered; waited {:.1}s for it at the end",
            seen.windows(2)
                .map(|p| p[0].claims.exp as f64 - p[1].at)
                .fold(f64::INFINITY, f64::min),
            requests.len(),
            waited.as_secs_f64()
        );
        waited
    }
}
