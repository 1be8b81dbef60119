//! The binaries' Kubernetes client: the in-cluster or KUBECONFIG configuration, with a
//! `User-Agent` naming the program and its version, so that the API server's audit log and
//! request metrics tell its requests apart (kubectl and controller-runtime managers do the same;
//! kube-rs sends none).

use anyhow::Context as _;

/// A client for `program` at `version`, e.g. `slurm-operator/0.1.1`.
pub async fn connect(program: &str, version: &str) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::infer()
        .await
        .context("cannot reach the Kubernetes API server (KUBECONFIG or in-cluster config)")?;
    config.headers.push(user_agent(program, version)?);
    kube::Client::try_from(config).context("cannot build the Kubernetes client")
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
    fn the_user_agent_names_the_program_and_its_version() {
        let (name, value) = super::user_agent("slurm-operator", "0.1.1").unwrap();
        assert_eq!(
            (name.as_str(), value.to_str().unwrap()),
            ("user-agent", "slurm-operator/0.1.1")
        );
    }
}
