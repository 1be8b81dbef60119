//! A loopback HTTP/1.1 server that answers GETs with recorded bodies, so the client's own
//! decoding and conversion run on real responses without a cluster. Bodies are shared, never
//! copied per request (the decode benchmark counts allocations). Query strings are ignored;
//! a trailing `/` does not matter. Unknown paths get 404.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, RwLock};

type Routes = Arc<RwLock<HashMap<String, (u16, Arc<Vec<u8>>)>>>;

pub struct Replay {
    pub url: String,
    routes: Routes,
}

impl Replay {
    pub fn start() -> Replay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let routes = Routes::default();
        let shared = routes.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let routes = shared.clone();
                std::thread::spawn(move || serve(stream, &routes));
            }
        });
        Replay { url, routes }
    }

    /// Answers GET `path` with `status` and `body` from now on.
    pub fn set(&self, path: &str, status: u16, body: Arc<Vec<u8>>) {
        self.routes
            .write()
            .expect("routes")
            .insert(key(path), (status, body));
    }
}

fn key(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    path.trim_end_matches('/').to_string()
}

/// Serves requests on one keep-alive connection until the client closes it.
fn serve(stream: TcpStream, routes: &Routes) {
    // Head and body go out in two writes: without this, Nagle's algorithm and delayed ACKs
    // add 40 ms to every answer.
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        // Headers: GETs carry no body, so the blank line ends the request.
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or("/");
        let found = routes.read().expect("routes").get(&key(path)).cloned();
        let (status, body) = found.unwrap_or_else(|| {
            let body = format!(
                r#"{{"errors":[{{"error_number":404,"error":"not recorded","description":"{path}"}}]}}"#
            );
            (404, Arc::new(body.into_bytes()))
        });
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&body).is_err() {
            return;
        }
    }
}
