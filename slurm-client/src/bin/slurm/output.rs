//! Printing results: a table for people or JSON for scripts.

use std::io::Write;

use anyhow::Context as _;
use clap::ValueEnum;
use serde::Serialize;

/// The `--output` format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns (or `Key: value` lines for one object).
    Table,
    /// Pretty-printed JSON of the library's model types.
    Json,
}

/// Writes `text` to stdout; a closed pipe (`slurm jobs | head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}

/// Prints `value` as pretty JSON followed by a newline.
pub fn json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("cannot encode JSON")?;
    text.push('\n');
    print(&text)
}

/// Prints `value` as JSON or as the table `table` makes of it.
pub fn emit<T: Serialize + ?Sized>(
    output: Output,
    value: &T,
    table: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    match output {
        Output::Json => json(value),
        Output::Table => print(&table(value)),
    }
}

/// Prints Slurm's `warnings[]` on stderr, where they do not disturb the output.
pub fn warnings(warnings: &[slurm_client::SlurmWarning]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}
