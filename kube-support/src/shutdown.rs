//! The end of a process's life as Kubernetes signals it: the kubelet stops a container with
//! SIGTERM (then SIGKILL after the grace period), a terminal with SIGINT.

/// Completes on SIGINT or SIGTERM.
pub async fn signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = term => {},
    }
}
