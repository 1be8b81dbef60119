//! Running one action on several jobs or nodes: go on after a failure (like `scancel`),
//! report each failure on stderr, and exit with the first failure's code.

use std::fmt::Display;
use std::future::Future;

use serde_json::{Value, json};

use crate::exit;
use crate::output::{Output, emit};

/// Runs `op` on every item in turn. Prints `<Noun> <item> <done>` per success (table) or one
/// `{<key>, action, ok, error}` object per item (JSON).
pub async fn each<T, F, Fut>(
    output: Output,
    noun: &str,
    key: &str,
    action: &str,
    done: &str,
    items: &[T],
    op: F,
) -> anyhow::Result<()>
where
    T: Display + serde::Serialize,
    F: Fn(&T) -> Fut,
    Fut: Future<Output = Result<(), slurm_client::Error>>,
{
    let mut outcomes: Vec<Value> = Vec::new();
    let mut lines = String::new();
    let mut first_failure = None;
    for item in items {
        match op(item).await {
            Ok(()) => {
                outcomes.push(json!({ key: item, "action": action, "ok": true, "error": null }));
                lines.push_str(&format!("{noun} {item} {done}\n"));
            }
            Err(e) => {
                let message = e.to_string();
                let e = anyhow::Error::new(e).context(format!("{} {item}", noun.to_lowercase()));
                exit::report(&e);
                outcomes
                    .push(json!({ key: item, "action": action, "ok": false, "error": message }));
                first_failure.get_or_insert(exit::code(&e));
            }
        }
    }
    emit(output, &outcomes, |_| lines)?;
    match first_failure {
        Some(code) => Err(exit::Reported(code).into()),
        None => Ok(()),
    }
}
