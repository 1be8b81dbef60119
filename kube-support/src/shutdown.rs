//! The end of a process's life as Kubernetes signals it: the kubelet stops a container with
//! SIGTERM (then SIGKILL after the grace period), a terminal with SIGINT. [`Shutdown`] carries
//! that moment to every part that must stop cleanly (servers draining, a Lease released).

use std::sync::Arc;

use tokio::sync::watch;

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

/// A one-way trigger that every part of the process can wait on: cloneable, and every clone sees
/// the same trigger. Once triggered it stays triggered.
#[derive(Clone)]
pub struct Shutdown(Arc<watch::Sender<bool>>);

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Shutdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shutdown")
            .field("triggered", &self.is_triggered())
            .finish()
    }
}

impl Shutdown {
    /// A trigger that only [`Shutdown::trigger`] fires (tests, or a caller with its own reason).
    pub fn new() -> Shutdown {
        Shutdown(Arc::new(watch::Sender::new(false)))
    }

    /// A trigger that SIGTERM or SIGINT also fires. Spawns a task, so call it inside the runtime.
    pub fn on_signal() -> Shutdown {
        let shutdown = Shutdown::new();
        let fire = shutdown.clone();
        tokio::spawn(async move {
            signal().await;
            tracing::info!("shutdown signal received");
            fire.trigger();
        });
        shutdown
    }

    /// Fires the trigger; later calls do nothing.
    pub fn trigger(&self) {
        self.0.send_if_modified(|v| !std::mem::replace(v, true));
    }

    /// Whether the trigger has fired.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the trigger has fired (at once if it already has).
    pub async fn triggered(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = rx.wait_for(|v| *v).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_clone_sees_one_trigger() {
        let a = Shutdown::new();
        let b = a.clone();
        assert!(!b.is_triggered());
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.triggered().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        a.trigger();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("waiter woke")
            .unwrap();
        assert!(b.is_triggered());
        // Already triggered: resolves at once; a second trigger is harmless.
        a.trigger();
        tokio::time::timeout(Duration::from_millis(100), b.triggered())
            .await
            .expect("resolves at once");
    }
}
