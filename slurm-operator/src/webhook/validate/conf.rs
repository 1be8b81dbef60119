//! Syntax checks of the configuration text users append: `extraConf` of a Controller
//! (slurm.conf) or an Accounting (slurmdbd.conf) is lines, a NodeSet's is slurmd `--conf`
//! tokens.

use super::Findings;

/// A logical line of a Slurm configuration file: `#` starts a comment (`\#` does not), a
/// trailing `\` continues the line on the next one. `number` is the first physical line.
struct Line {
    number: usize,
    text: String,
}

fn logical_lines(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut pending: Option<Line> = None;
    for (i, raw) in text.lines().enumerate() {
        let code = strip_comment(raw);
        let (code, continued) = match code.trim_end().strip_suffix('\\') {
            Some(head) => (head.to_string(), true),
            None => (code, false),
        };
        let line = match pending.take() {
            Some(mut l) => {
                l.text.push(' ');
                l.text.push_str(&code);
                l
            }
            None => Line {
                number: i + 1,
                text: code,
            },
        };
        if continued {
            pending = Some(line);
        } else {
            out.push(line);
        }
    }
    out.extend(pending);
    out.retain(|l| !l.text.trim().is_empty());
    out
}

fn strip_comment(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'#') => {
                out.push('#');
                chars.next();
            }
            '#' => break,
            _ => out.push(c),
        }
    }
    out
}

fn is_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks that every non-empty, non-comment line of `text` is `Key=Value…` (or an `Include`
/// line) and returns each line's key with its line number, for the caller's own rules.
pub(super) fn check_conf_lines(f: &mut Findings, field: &str, text: &str) -> Vec<(usize, String)> {
    let mut keys = Vec::new();
    for line in logical_lines(text) {
        let trimmed = line.text.trim();
        let first = trimmed.split_whitespace().next().unwrap_or_default();
        if first.eq_ignore_ascii_case("include") && trimmed.len() > first.len() {
            continue;
        }
        match first.split_once('=') {
            Some((key, _)) if is_key(key) => keys.push((line.number, key.to_string())),
            _ => f.error(
                field,
                format!("line {}: {trimmed:?} is not Key=Value", line.number),
            ),
        }
    }
    keys
}

/// Checks a NodeSet's `extraConf`: whitespace-separated `Key=Value[,Value…]` tokens, which the
/// operator passes to slurmd inside a single-quoted shell word.
pub(super) fn check_conf_tokens(f: &mut Findings, field: &str, text: &str) {
    for token in text.split_whitespace() {
        match token.split_once('=') {
            None => f.error(field, format!("token {token:?} is not Key=Value")),
            Some((key, _)) if !is_key(key) => f.error(
                field,
                format!("token {token:?}: the key must be letters, digits or '_'"),
            ),
            // Ours: a quote would end the shell word the operator wraps the tokens in.
            Some(_) if token.contains('\'') => f.error(
                field,
                format!("token {token:?}: single quotes are not allowed"),
            ),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> (Vec<(usize, String)>, String) {
        let mut f = Findings::default();
        let keys = check_conf_lines(&mut f, "spec.extraConf", text);
        (keys, f.verdict().message)
    }

    fn tokens(text: &str) -> String {
        let mut f = Findings::default();
        check_conf_tokens(&mut f, "spec.extraConf", text);
        f.verdict().message
    }

    #[test]
    fn slurm_conf_lines() {
        let (keys, msg) = lines(
            "# comment\n\nSchedulerType=sched/backfill\n  PartitionName=all Nodes=ALL # tail\n\
             include /etc/slurm/extra.conf\nSchedulerParameters=a,\\\n  b\nDebugFlags=\n\
             Comment=a\\#b\n",
        );
        assert_eq!(msg, "");
        let keys: Vec<(usize, &str)> = keys.iter().map(|(n, k)| (*n, k.as_str())).collect();
        assert_eq!(
            keys,
            [
                (3, "SchedulerType"),
                (4, "PartitionName"),
                (6, "SchedulerParameters"),
                (8, "DebugFlags"),
                (9, "Comment")
            ]
        );

        let (_, msg) = lines("A=1\nnot a key value\nB=2\n=3\nInclude\nFoo-Bar=1\n");
        assert_eq!(
            msg,
            "spec.extraConf: line 2: \"not a key value\" is not Key=Value; \
             spec.extraConf: line 4: \"=3\" is not Key=Value; \
             spec.extraConf: line 5: \"Include\" is not Key=Value; \
             spec.extraConf: line 6: \"Foo-Bar=1\" is not Key=Value"
        );
        let (_, msg) = lines("A=1 \\\nB=2\nC\n");
        assert_eq!(msg, "spec.extraConf: line 3: \"C\" is not Key=Value");
    }

    #[test]
    fn slurmd_conf_tokens() {
        assert_eq!(tokens(""), "");
        assert_eq!(
            tokens("  CPUs=2   RealMemory=2048 Features=a,b Gres=gpu:8 Weight= "),
            ""
        );
        assert_eq!(
            tokens("CPUs=2 RealMemory 4096"),
            "spec.extraConf: token \"RealMemory\" is not Key=Value; \
             spec.extraConf: token \"4096\" is not Key=Value"
        );
        assert_eq!(
            tokens("=2"),
            "spec.extraConf: token \"=2\": the key must be letters, digits or '_'"
        );
        assert_eq!(
            tokens("Features=a'b"),
            "spec.extraConf: token \"Features=a'b\": single quotes are not allowed"
        );
    }
}
