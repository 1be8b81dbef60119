//! The binaries' Kubernetes client: the in-cluster or KUBECONFIG configuration, with a
//! `User-Agent` naming the program and its version, so that the API server's audit log and
//! request metrics tell its requests apart (kubectl and controller-runtime managers do the same;
//! kube-rs sends none), and timeouts so that no request waits forever on a dead connection.

use std::time::Duration;

use anyhow::Context as _;

/// A client for `program` at `version`, e.g. `slurm-operator/0.1.1`.
pub async fn connect(program: &str, version: &str) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::infer()
        .await
        .context("cannot reach the Kubernetes API server (KUBECONFIG or in-cluster config)")?;
    config.headers.push(user_agent(program, version)?);
    with_timeouts(&mut config);
    kube::Client::try_from(config).context("cannot build the Kubernetes client")
}

/// How long a connection may take to open: an API server that drops SYNs is given up on and
/// tried again, not waited for for kube's default 30 s.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response may go without a byte. kube sets no read timeout, so a request on a
/// connection whose peer vanished (a black-holed route, a dead load balancer) waits forever.
/// Not shorter: a watch is quiet until its server ends it at `timeoutSeconds`, 290 s for every
/// watch of kube-runtime's watcher (kube's own `read_timeout` was 295 s for this reason until it
/// dropped it for exec sessions, which these binaries do not open). Calls that must end sooner
/// carry their own timeouts: the leader election's 4 s each, and the leader's renew deadline
/// stops the process long before this could matter for its writes.
const READ_TIMEOUT: Duration = Duration::from_secs(295);
/// How long writing a request may stall, kube's default spelled out beside the others.
const WRITE_TIMEOUT: Duration = Duration::from_secs(295);

/// Sets the timeouts above; the read timeout counts from each request's last write, not from
/// when its pooled connection went idle (up to 90 s earlier).
fn with_timeouts(config: &mut kube::Config) {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.write_timeout = Some(WRITE_TIMEOUT);
    config.reset_reader_on_write = true;
}

fn user_agent(
    program: &str,
    version: &str,
) -> anyhow::Result<(::http::HeaderName, ::http::HeaderValue)> {
    let value = ::http::HeaderValue::from_str(&format!("{program}/{version}"))
        .with_context(|| format!("user agent {program}/{version}"))?;
    Ok((::http::header::USER_AGENT, value))
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_request_waits_forever_and_a_watch_ends_before_its_read_timeout() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        super::with_timeouts(&mut config);
        assert!(config.connect_timeout.is_some() && config.write_timeout.is_some());
        // kube-runtime's watcher asks the server to end each watch after 290 s.
        assert!(config.read_timeout.unwrap() > std::time::Duration::from_secs(290));
        assert!(config.reset_reader_on_write);
    }

    #[test]
    fn the_user_agent_names_the_program_and_its_version() {
        let (name, value) = super::user_agent("slurm-operator", "0.1.1").unwrap();
        assert_eq!(
            (name.as_str(), value.to_str().unwrap()),
            ("user-agent", "slurm-operator/0.1.1")
        );
    }
}
