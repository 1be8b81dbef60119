//! Container logs as conmon's `k8s-file` driver writes them: the CRI format the kubelet reads,
//! `<RFC 3339 time> <stdout|stderr> <F|P> <text>`, where `P` marks a partial line that the next
//! line of the same stream continues.

use std::path::Path;

use anyhow::{Context, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub time: String,
    pub stream: Stream,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// The whole lines of a log, partial lines joined. A missing file is an empty log: conmon creates
/// it only when the container starts.
pub async fn read(path: &Path) -> Result<Vec<LogLine>> {
    let text = match tokio::fs::read(path).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(parse(&text))
}

pub fn parse(text: &str) -> Vec<LogLine> {
    let mut lines = Vec::new();
    let mut partial: [Option<LogLine>; 2] = [None, None];
    for raw in text.lines() {
        let mut parts = raw.splitn(4, ' ');
        let (Some(time), Some(stream), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let text = parts.next().unwrap_or("");
        let stream = match stream {
            "stdout" => Stream::Stdout,
            "stderr" => Stream::Stderr,
            _ => continue,
        };
        let slot = &mut partial[stream as usize];
        let line = match slot.take() {
            Some(mut started) => {
                started.text.push_str(text);
                started
            }
            None => LogLine {
                time: time.to_owned(),
                stream,
                text: text.to_owned(),
            },
        };
        if tag == "P" {
            *slot = Some(line);
        } else {
            lines.push(line);
        }
    }
    lines.extend(partial.into_iter().flatten());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_partial_lines_per_stream() {
        let text = "t1 stdout P hel\nt2 stderr F oops\nt3 stdout F lo world\nt4 stdout F \n";
        let lines = parse(text);
        let texts: Vec<_> = lines.iter().map(|l| (l.stream, l.text.as_str())).collect();
        assert_eq!(
            texts,
            [
                (Stream::Stderr, "oops"),
                (Stream::Stdout, "hello world"),
                (Stream::Stdout, "")
            ]
        );
        assert_eq!(lines[1].time, "t1");
    }
}
