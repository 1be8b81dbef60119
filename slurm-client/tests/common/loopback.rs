//! A raw TCP server on 127.0.0.1 for the failures a real slurmrestd does not produce on
//! demand: connections reset, bodies cut short, lengths that lie.

use std::time::Duration;

use slurm_client::RetryPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server does with one connection.
pub enum Raw {
    /// Closes it with an RST.
    Reset,
    /// Sends these bytes, then closes it.
    Send(Vec<u8>),
}

/// Serves each connection with the next action, then stops listening; returns its URL.
pub async fn raw_server(actions: Vec<Raw>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for action in actions {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 8192];
            let _ = stream.read(&mut buf).await;
            match action {
                Raw::Reset => {
                    // Linger 0 makes the close an RST; with zero it does not block.
                    #[allow(deprecated)]
                    stream.set_linger(Some(Duration::ZERO)).unwrap();
                    drop(stream);
                }
                Raw::Send(bytes) => {
                    let _ = stream.write_all(&bytes).await;
                    let _ = stream.shutdown().await;
                }
            }
        }
    });
    format!("http://{addr}")
}

/// A 200 JSON answer with `body`; `length` is the promised content length (`None`: none,
/// the close ends the body).
pub fn answer(body: &str, length: Option<usize>) -> Raw {
    let length = length.map_or(String::new(), |n| format!("content-length: {n}\r\n"));
    Raw::Send(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{length}connection: close\r\n\r\n{body}"
        )
        .into_bytes(),
    )
}

/// Retries that take milliseconds, not seconds.
pub fn fast_retries() -> RetryPolicy {
    RetryPolicy::default()
        .max_retries(3)
        .min_delay(Duration::from_millis(5))
        .max_delay(Duration::from_millis(20))
        .jitter(false)
}
