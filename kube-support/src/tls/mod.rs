//! TLS for servers the API server calls (admission webhooks): a serving certificate that can be
//! swapped while running ([`ServingCert`]), read from a cert dir that cert-manager renews
//! ([`load_dir`], [`reload_dir`], [`watch_dir`]) or made at start with its own CA
//! ([`self_signed`]), the TLS acceptor of a webhook's server ([`acceptor`]) and a TLS listener
//! for `axum::serve` in tests ([`TlsListener`]). The crypto is
//! rustls with ring.

mod cert;
mod dir;
mod listener;
mod self_signed;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

pub use cert::{ServingCert, certified_key};
pub use dir::{
    CERT_FILE, DEFAULT_CERT_DIR, DirFiles, KEY_FILE, RELOAD_EVERY, load_dir, reload_dir, watch_dir,
};
pub use listener::{TlsListener, acceptor};
pub use self_signed::{SelfSigned, self_signed};

/// Installs ring as rustls' process-wide crypto provider (kube's client and any other rustls
/// user without its own provider need one); does nothing when one is installed already.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
