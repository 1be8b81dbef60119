//! The operator's `/metrics` scraped on the ground, as Prometheus would: the operator listens on
//! [`ADDR`] inside the ground (one operator test runs at a time, so the port is free) and the
//! test reaches it through a forwarded port.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Where the cluster test's operator serves `/metrics` (inside the ground's network namespace).
pub const ADDR: &str = "127.0.0.1:18480";

/// Every reconciler, as `slurm_operator_reconciles_total` labels them.
pub const CONTROLLERS: [&str; 6] = [
    "controller",
    "nodeset",
    "restapi",
    "accounting",
    "loginset",
    "token",
];

/// One scrape's samples.
pub struct Scrape {
    text: String,
}

/// `GET /metrics` through `forwarded` (the forward of [`ADDR`]); panics when it does not answer.
pub fn scrape(forwarded: SocketAddr) -> Scrape {
    let mut last = String::new();
    for _ in 0..20 {
        match get(forwarded) {
            Ok(text) => return Scrape { text },
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("GET http://{ADDR}/metrics: {last}");
}

fn get(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP answer: {raw:?}")))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!("answer {head:?}")));
    }
    Ok(body.to_owned())
}

impl Scrape {
    /// The sum of the samples of `name` whose labels include every one of `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
                if metric != name {
                    return None;
                }
                let set = rest.strip_suffix('}')?;
                labels
                    .iter()
                    .all(|(k, v)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\"")))
                    .then(|| value.parse::<f64>().ok())?
            })
            .sum()
    }

    /// Reconciles of `controller` that ended otherwise than `ok`.
    pub fn failed_reconciles(&self, controller: &str) -> f64 {
        self.sum(
            "slurm_operator_reconciles_total",
            &[("controller", controller)],
        ) - self.ok_reconciles(controller)
    }

    /// Reconciles of `controller` that ended `ok`.
    pub fn ok_reconciles(&self, controller: &str) -> f64 {
        self.sum(
            "slurm_operator_reconciles_total",
            &[("controller", controller), ("result", "ok")],
        )
    }

    /// Whether the family `name` is declared (`# TYPE name kind`), samples or not.
    pub fn declares(&self, name: &str, kind: &str) -> bool {
        self.text
            .lines()
            .any(|l| l == format!("# TYPE {name} {kind}"))
    }

    /// The lines of family `prefix`, for messages.
    pub fn lines(&self, prefix: &str) -> String {
        self.text
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[test]
fn samples_are_summed_by_labels() {
    let s = Scrape {
        text: "# TYPE slurm_operator_reconciles counter\n\
               slurm_operator_reconciles_total{controller=\"nodeset\",result=\"ok\"} 5\n\
               slurm_operator_reconciles_total{controller=\"nodeset\",result=\"slurm\"} 2\n\
               slurm_operator_reconciles_total{controller=\"token\",result=\"ok\"} 1\n\
               slurm_operator_up 1\n"
            .into(),
    };
    assert_eq!(s.ok_reconciles("nodeset"), 5.0);
    assert_eq!(s.failed_reconciles("nodeset"), 2.0);
    assert_eq!(s.sum("slurm_operator_reconciles_total", &[]), 8.0);
    assert_eq!(s.sum("slurm_operator_up", &[]), 1.0);
    assert!(s.declares("slurm_operator_reconciles", "counter"));
    assert!(!s.declares("slurm_operator_slurm_request_errors", "counter"));
}
