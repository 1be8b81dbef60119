//! Sockets in another network namespace, for a process that stays in the host's.
//!
//! A socket belongs for its whole life to the network namespace of the thread that created it,
//! whichever thread later uses it. So one dedicated OS thread joins the namespace (`setns`) and
//! does nothing but create sockets there; they come back to the async runtime, whose threads stay
//! in the host's namespace (where the API server's loopback address is), and are used there like
//! any other. Only creation happens on that thread: a bind is instant, and a connect is started
//! on the runtime with a socket made here.

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;

use anyhow::{Context, Result};
use nix::sched::{CloneFlags, setns};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// A handle to the thread that makes sockets in one namespace; it ends when the last handle goes.
#[derive(Clone, Debug)]
pub struct NetnsSockets {
    jobs: mpsc::Sender<Job>,
}

impl NetnsSockets {
    /// Starts the thread in the namespace at `path` (`/run/netns/<name>`).
    pub fn enter(path: &Path) -> Result<Self> {
        let ns = File::open(path)
            .with_context(|| format!("opening network namespace {}", path.display()))?;
        let (jobs, rx) = mpsc::channel::<Job>();
        let (entered_tx, entered) = mpsc::channel();
        std::thread::Builder::new()
            .name("netns-sockets".into())
            .spawn(move || {
                let joined = setns(&ns, CloneFlags::CLONE_NEWNET);
                let ok = joined.is_ok();
                let _ = entered_tx.send(joined);
                if ok {
                    for job in rx {
                        job();
                    }
                }
            })
            .context("starting the namespace's socket thread")?;
        entered
            .recv()
            .context("the namespace's socket thread ended")?
            .with_context(|| format!("joining network namespace {}", path.display()))?;
        Ok(Self { jobs })
    }

    async fn run<T: Send + 'static>(
        &self,
        make: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(make());
            }))
            .map_err(|_| io::Error::other("the namespace's socket thread is gone"))?;
        rx.await
            .map_err(|_| io::Error::other("the namespace's socket thread is gone"))?
    }

    pub async fn tcp_listener(&self, addr: SocketAddr) -> io::Result<TcpListener> {
        let std = self
            .run(move || {
                let l = std::net::TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Ok(l)
            })
            .await?;
        TcpListener::from_std(std)
    }

    pub async fn udp_socket(&self, addr: SocketAddr) -> io::Result<UdpSocket> {
        let std = self
            .run(move || {
                let s = std::net::UdpSocket::bind(addr)?;
                s.set_nonblocking(true)?;
                Ok(s)
            })
            .await?;
        UdpSocket::from_std(std)
    }

    /// A connection from inside the namespace to `addr` (IPv4): the dial endpoint's
    /// ([`super::dial`]) to a Service's ClusterIP.
    pub async fn tcp_connect(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let socket = self.run(TcpSocket::new_v4).await?;
        socket.connect(addr).await
    }
}

#[cfg(test)]
pub mod testing {
    //! A throwaway network namespace for tests, deleted on drop (needs root and iproute2).
    use std::process::Command;

    pub struct TestNetns {
        pub name: String,
    }

    impl TestNetns {
        pub fn new(tag: &str) -> Self {
            let name = format!("netd-test-{tag}-{}", std::process::id());
            if std::path::Path::new("/run/netns").join(&name).exists() {
                ip(&["netns", "delete", &name]);
            }
            ip(&["netns", "add", &name]);
            ip(&["-n", &name, "link", "set", "lo", "up"]);
            Self { name }
        }

        pub fn path(&self) -> std::path::PathBuf {
            std::path::Path::new("/run/netns").join(&self.name)
        }
    }

    impl Drop for TestNetns {
        fn drop(&mut self) {
            let _ = Command::new("ip")
                .args(["netns", "delete", &self.name])
                .status();
        }
    }

    pub fn ip(args: &[&str]) {
        let out = Command::new("ip").args(args).output().expect("running ip");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Needs root: listens on an address that exists only in a throwaway namespace, and reaches it
    /// from there, while the same address is unreachable from the host's namespace.
    #[tokio::test]
    async fn sockets_live_in_the_namespace() {
        let ns = TestNetns::new("sock");
        ip(&["-n", &ns.name, "addr", "add", "10.96.200.1/32", "dev", "lo"]);
        let sockets = NetnsSockets::enter(&ns.path()).unwrap();
        let addr: SocketAddr = "10.96.200.1:8080".parse().unwrap();
        let listener = sockets.tcp_listener(addr).await.unwrap();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            conn.write_all(b"pong").await.unwrap();
        });
        let mut conn = sockets.tcp_connect(addr).await.unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"pong");
        server.await.unwrap();

        // Binding the same address in the host's namespace fails: it is not local there.
        assert!(std::net::TcpListener::bind(addr).is_err());
        let udp = sockets
            .udp_socket("10.96.200.1:5353".parse().unwrap())
            .await;
        assert!(udp.is_ok(), "{udp:?}");
    }
}
