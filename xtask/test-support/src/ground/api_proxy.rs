//! A TCP proxy between one process inside the ground and the API server, that a test can pause:
//! while paused no byte passes either way and new connections wait, but every connection stays
//! open, as when a network path black-holes (no RST, no FIN). The process reaches it through its
//! own kubeconfig copy, at 127.0.0.1 inside the ground's network namespace (a name the API
//! server's certificate carries, as the host's kubeconfig uses it).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::Ground;
use super::netns;

/// See the module doc. Closes every connection when dropped.
pub struct ApiProxy {
    state: Arc<State>,
    listen: SocketAddr,
    kubeconfig: PathBuf,
}

struct State {
    paused: Mutex<bool>,
    resumed: Condvar,
    closed: AtomicBool,
    streams: Mutex<Vec<TcpStream>>,
}

impl State {
    /// Blocks while paused; `false` once closed.
    fn pass(&self) -> bool {
        let mut paused = self.paused.lock().unwrap();
        while *paused && !self.closed.load(Ordering::SeqCst) {
            paused = self.resumed.wait(paused).unwrap();
        }
        !self.closed.load(Ordering::SeqCst)
    }

    fn track(&self, stream: &TcpStream) {
        if let Ok(s) = stream.try_clone() {
            self.streams.lock().unwrap().push(s);
        }
    }
}

impl Ground {
    /// A new [`ApiProxy`] to this ground's API server, with its kubeconfig written beside the
    /// ground's as `kubeconfig-proxy-<port>` (mode 0600).
    pub fn api_proxy(&self) -> ApiProxy {
        let text = std::fs::read_to_string(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("{}: {e}", self.kubeconfig.display()));
        let upstream =
            server_addr(&text).expect("the ground's kubeconfig names no 127.0.0.1 server");
        let listener = bind_inside();
        let listen = listener.local_addr().unwrap();
        let kubeconfig = self
            .kubeconfig
            .parent()
            .unwrap_or(Path::new("/tmp"))
            .join(format!("kubeconfig-proxy-{}", listen.port()));
        netns::write_private(&kubeconfig, &with_server(&text, listen))
            .unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
        let state = Arc::new(State {
            paused: Mutex::new(false),
            resumed: Condvar::new(),
            closed: AtomicBool::new(false),
            streams: Mutex::new(Vec::new()),
        });
        std::thread::spawn({
            let state = state.clone();
            move || accept(listener, upstream, state)
        });
        ApiProxy {
            state,
            listen,
            kubeconfig,
        }
    }
}

impl ApiProxy {
    /// The kubeconfig whose server is this proxy (for a process inside the ground).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Stops every byte, both ways, on every connection, and holds new connections.
    pub fn pause(&self) {
        *self.state.paused.lock().unwrap() = true;
    }

    /// Lets bytes flow again.
    pub fn resume(&self) {
        *self.state.paused.lock().unwrap() = false;
        self.state.resumed.notify_all();
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.state.closed.store(true, Ordering::SeqCst);
        self.resume();
        for s in self.state.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        // Wakes the accepting thread, which then sees `closed`.
        let listen = self.listen;
        let _ = inside(move || TcpStream::connect(listen));
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// Runs `f` on a thread that has joined the ground's network namespace (sockets it makes stay
/// there).
fn inside<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        let ns = std::fs::File::open(netns::NETNS_PATH).expect("the ground's network namespace");
        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .expect("joining the ground's network namespace");
        f()
    })
    .join()
    .unwrap()
}

fn bind_inside() -> TcpListener {
    inside(|| TcpListener::bind("127.0.0.1:0").expect("a port inside the ground"))
}

fn accept(listener: TcpListener, upstream: SocketAddr, state: Arc<State>) {
    for conn in listener.incoming() {
        if state.closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(inbound) = conn else { continue };
        state.track(&inbound);
        let state = state.clone();
        std::thread::spawn(move || {
            // A connection made while paused waits, as a SYN into a black hole would.
            if !state.pass() {
                return;
            }
            let Ok(outbound) = TcpStream::connect(upstream) else {
                return;
            };
            state.track(&outbound);
            let (a, b) = (inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
            let up = std::thread::spawn({
                let state = state.clone();
                move || copy(a, b, &state)
            });
            copy(outbound, inbound, &state);
            let _ = up.join();
        });
    }
}

/// Copies `from` to `to`, holding each chunk while paused.
fn copy(mut from: TcpStream, mut to: TcpStream, state: &State) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !state.pass() || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// The `127.0.0.1:<port>` of the kubeconfig's `server:` line.
fn server_addr(text: &str) -> Option<SocketAddr> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix("server:"))
        .and_then(|url| url.trim().strip_prefix("https://"))
        .and_then(|hostport| hostport.trim_end_matches('/').parse().ok())
}

/// The kubeconfig `text` with every `server:` line pointing at `addr`.
fn with_server(text: &str, addr: SocketAddr) -> String {
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with("server:") {
                let indent = &line[..line.len() - trimmed.len()];
                format!("{indent}server: https://{addr}\n")
            } else {
                format!("{line}\n")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_kubeconfig_names_the_proxy() {
        let text = "clusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: g\n";
        assert_eq!(server_addr(text), Some("127.0.0.1:6443".parse().unwrap()));
        let out = with_server(text, "127.0.0.1:40000".parse().unwrap());
        assert!(
            out.contains("    server: https://127.0.0.1:40000\n"),
            "{out}"
        );
        assert!(!out.contains("6443"));
    }
}
