use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use slurm_exporter::auth::BasicAuth;
use slurm_exporter::collector::{self, Store};
use slurm_exporter::config::Config;
use slurm_exporter::sources::{self, Ctx};
use slurm_exporter::{http, logging, serve, slurm};
use tracing::info;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    logging::init(config.log_format, &config.log)?;

    let client = slurm::client(&config)?;
    let auth = match (&config.basic_auth_user, &config.basic_auth_password_file) {
        (Some(user), Some(file)) => Some(BasicAuth::from_file(user.clone(), file)?),
        _ => None,
    };
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(serve::tls_acceptor(cert, key)?),
        _ => None,
    };

    let kinds = config.enabled_sources();
    let store = Arc::new(Store::new(&kinds));
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    info!(
        listen = %listener.local_addr()?,
        tls = tls.is_some(),
        basic_auth = auth.is_some(),
        slurmrestd = %client.endpoint(),
        interval = ?config.interval,
        sources = ?kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
        "slurm-exporter starting"
    );

    let ctx = Ctx::new(client, usize::from(config.max_in_flight));
    let sources = kinds
        .iter()
        .map(|k| (sources::make(*k, &config), config.timeout_of(*k)))
        .collect();
    // Collections decode large answers on the CPU (tens of MB at 20,000 jobs); on their own
    // thread they never hold up a scrape served by this runtime.
    let collection = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("collector")
        .enable_all()
        .build()
        .context("cannot start the collection runtime")?;
    let collector = {
        let _on_collection_runtime = collection.enter();
        collector::spawn(sources, ctx, config.interval, store.clone())
    };

    let served = serve::serve(listener, http::router(store, auth), tls, shutdown()).await;
    drop(collector);
    collection.shutdown_background();
    served?;
    info!("slurm-exporter stopped");
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
