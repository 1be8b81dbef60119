//! Exit codes scripts can rely on, and the one-line error report on stderr.

use std::process::ExitCode;

use slurm_client::{Error, ErrorKind};

/// Success.
pub const OK: u8 = 0;
/// Slurm rejected the request, or any other error.
pub const FAILED: u8 = 1;
/// Usage or configuration error (clap uses 2 for bad flags too).
pub const USAGE: u8 = 2;
/// The server refused the credentials, or no token could be had.
pub const AUTH: u8 = 3;
/// The job, node, … does not exist.
pub const NOT_FOUND: u8 = 4;
/// slurmrestd (or slurmctld behind it) could not be reached, or did not answer in time.
pub const UNREACHABLE: u8 = 5;
/// The server's REST version lacks the operation.
pub const UNSUPPORTED: u8 = 6;

/// A failure found by the tool itself, with the exit code it stands for.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

/// Failures already reported on stderr; only the exit code is left to give.
#[derive(Debug, thiserror::Error)]
#[error("failed (exit code {0})")]
pub struct Reported(pub u8);

/// A mistake in what the user asked for (exit code 2).
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    failure(USAGE, message)
}

/// A failure with this exit code.
pub fn failure(code: u8, message: impl Into<String>) -> anyhow::Error {
    Failure {
        code,
        message: message.into(),
    }
    .into()
}

/// The exit code for a library error.
pub fn code_of(error: &Error) -> u8 {
    match error.kind() {
        ErrorKind::Auth | ErrorKind::Credentials => AUTH,
        ErrorKind::NotFound => NOT_FOUND,
        ErrorKind::Transport | ErrorKind::Timeout => UNREACHABLE,
        ErrorKind::Unsupported | ErrorKind::NoCommonVersion => UNSUPPORTED,
        ErrorKind::Config => USAGE,
        // A proxy's 502/503/504, or slurmrestd saying it cannot reach slurmctld.
        _ if error.is_transient() => UNREACHABLE,
        _ => FAILED,
    }
}

/// The exit code for any error of a command.
pub fn code(error: &anyhow::Error) -> u8 {
    if let Some(Reported(code)) = error.downcast_ref::<Reported>() {
        *code
    } else if let Some(e) = error.downcast_ref::<Error>() {
        code_of(e)
    } else if let Some(f) = error.downcast_ref::<Failure>() {
        f.code
    } else {
        FAILED
    }
}

/// Prints `error` on stderr — one line, then one indented line per Slurm `errors[]` entry —
/// and returns its exit code.
pub fn report(error: &anyhow::Error) -> ExitCode {
    let slurm = error.downcast_ref::<Error>();
    match slurm {
        _ if error.downcast_ref::<Reported>().is_some() => {}
        // The library's messages already hold their causes: print no source chain.
        Some(e) => {
            eprintln!("error: {}", headline(error, e));
            for entry in e.slurm_errors() {
                eprintln!("  slurm: {entry}");
            }
        }
        None => eprintln!("error: {error:#}"),
    }
    ExitCode::from(code(error))
}

/// The error without its `errors[]` list (printed on lines of their own), with any context
/// added by the command in front.
fn headline(error: &anyhow::Error, slurm: &Error) -> String {
    let what = match slurm {
        Error::NotFound {
            method,
            path,
            status,
            ..
        } => {
            format!("{method} {path}: not found (HTTP {status})")
        }
        Error::Rejected {
            method,
            path,
            status,
            ..
        } => {
            format!("{method} {path}: rejected by Slurm (HTTP {status})")
        }
        other => other.to_string(),
    };
    let contexts: Vec<String> = error
        .chain()
        .take_while(|cause| cause.downcast_ref::<Error>().is_none())
        .map(ToString::to_string)
        .collect();
    if contexts.is_empty() {
        what
    } else {
        format!("{}: {what}", contexts.join(": "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_map_to_documented_codes() {
        assert_eq!(code_of(&Error::Config("x".into())), USAGE);
        let e = Error::unsupported("job requeue", slurm_client::ApiVersion::V0_0_42, None);
        assert_eq!(code_of(&e), UNSUPPORTED);
        assert_eq!(
            code_of(&Error::NoCommonVersion { tried: vec![] }),
            UNSUPPORTED
        );
        let e = Error::Status {
            method: slurm_client::Method::GET,
            path: "/".into(),
            status: 503,
            excerpt: String::new(),
        };
        assert_eq!(code_of(&e), UNREACHABLE);
        let e = Error::Status {
            method: slurm_client::Method::GET,
            path: "/".into(),
            status: 500,
            excerpt: String::new(),
        };
        assert_eq!(code_of(&e), FAILED);
        assert_eq!(code(&usage("bad")), USAGE);
        assert_eq!(code(&anyhow::anyhow!("other")), FAILED);
        let wrapped = anyhow::Error::new(Error::Config("x".into())).context("job 5");
        assert_eq!(code(&wrapped), USAGE);
    }
}
