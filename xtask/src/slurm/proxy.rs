//! Forwards a host loopback TCP port to slurmrestd's unix socket inside the cluster's root.
//!
//! The cluster's own listeners exist only in its private network namespace; this is its one door.

use std::io::{Read, Write, copy};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::{Context, Result};

pub fn serve(listen: &str, socket: &Path) -> Result<()> {
    let listener = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        let socket = socket.to_owned();
        std::thread::spawn(move || {
            if let Ok(unix) = UnixStream::connect(&socket) {
                pipe(tcp, unix);
            }
        });
    }
    Ok(())
}

fn pipe(tcp: TcpStream, unix: UnixStream) {
    let (Ok(tcp_back), Ok(unix_back)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let upstream = std::thread::spawn(move || forward(tcp, unix, |u| u.shutdown(Shutdown::Write)));
    forward(unix_back, tcp_back, |t| t.shutdown(Shutdown::Write));
    let _ = upstream.join();
}

fn forward<R: Read, W: Write>(
    mut from: R,
    mut to: W,
    close: impl FnOnce(&W) -> std::io::Result<()>,
) {
    let _ = copy(&mut from, &mut to);
    let _ = close(&to);
}
