//! Service account tokens: each pod gets a token of its own service account
//! (`system:serviceaccount:<namespace>:<name>`), added to the API server's static token file, which
//! the server reads again when it changes. The ground's API server has no TokenRequest API; this
//! stands in for it so that the audit log names the service account a component runs as, and a
//! chart's RBAC can be checked against what each component really did.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result};

/// Tokens per (namespace, service account), or one shared token when no token file is given.
pub struct Tokens {
    auth_file: Option<PathBuf>,
    shared: String,
    issued: Mutex<HashMap<(String, String), String>>,
}

impl Tokens {
    /// `auth_file`: the API server's token file (CSV `token,user,uid,"groups"`); `shared`: the token
    /// every pod gets without one.
    pub fn new(auth_file: Option<PathBuf>, shared: String) -> Self {
        Self {
            auth_file,
            shared,
            issued: Mutex::new(HashMap::new()),
        }
    }

    /// The token of `namespace`/`account`, issued on first use (and found again after a restart).
    pub fn token(&self, namespace: &str, account: &str) -> Result<String> {
        let Some(file) = &self.auth_file else {
            return Ok(self.shared.clone());
        };
        let key = (namespace.to_owned(), account.to_owned());
        let mut issued = self.issued.lock().expect("not poisoned");
        if let Some(t) = issued.get(&key) {
            return Ok(t.clone());
        }
        let user = user(namespace, account);
        let existing = std::fs::read_to_string(file).unwrap_or_default();
        let token = match find(&existing, &user) {
            Some(t) => t,
            None => {
                let token = random_token()?;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(file)
                    .with_context(|| format!("opening {}", file.display()))?;
                let sep = if existing.is_empty() || existing.ends_with('\n') {
                    ""
                } else {
                    "\n"
                };
                f.write_all(line(&token, namespace, account, sep).as_bytes())
                    .with_context(|| format!("writing {}", file.display()))?;
                token
            }
        };
        issued.insert(key, token.clone());
        Ok(token)
    }
}

fn user(namespace: &str, account: &str) -> String {
    format!("system:serviceaccount:{namespace}:{account}")
}

/// The token-file line of a service account, with the groups the real authenticator gives it.
fn line(token: &str, namespace: &str, account: &str, sep: &str) -> String {
    format!(
        "{sep}{token},{},kube-ground-sa-{namespace}-{account},\"system:serviceaccounts,system:serviceaccounts:{namespace},system:authenticated\"\n",
        user(namespace, account)
    )
}

fn find(csv: &str, user: &str) -> Option<String> {
    csv.lines().find_map(|l| {
        let mut fields = l.splitn(3, ',');
        let token = fields.next()?;
        (fields.next()? == user).then(|| token.to_owned())
    })
}

fn random_token() -> Result<String> {
    let mut raw = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .context("reading /dev/urandom")?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_one_token_per_account_and_finds_it_again() {
        let dir = std::env::temp_dir().join(format!("tokens-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens.csv");
        std::fs::write(&file, "admin-token,kubernetes-admin,1,\"system:masters\"").unwrap();
        let tokens = Tokens::new(Some(file.clone()), "shared".into());
        let a = tokens.token("slinky", "slurm-operator").unwrap();
        let b = tokens.token("slurm", "default").unwrap();
        assert_ne!(a, b);
        assert_eq!(tokens.token("slinky", "slurm-operator").unwrap(), a);
        let csv = std::fs::read_to_string(&file).unwrap();
        assert_eq!(csv.lines().count(), 3, "{csv}");
        assert!(csv.contains(&format!(
            "{a},system:serviceaccount:slinky:slurm-operator,kube-ground-sa-slinky-slurm-operator,\"system:serviceaccounts,system:serviceaccounts:slinky,system:authenticated\""
        )));
        // A kubelet started again finds the tokens it issued.
        let again = Tokens::new(Some(file), "shared".into());
        assert_eq!(again.token("slinky", "slurm-operator").unwrap(), a);
        assert_eq!(
            Tokens::new(None, "shared".into()).token("x", "y").unwrap(),
            "shared"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
