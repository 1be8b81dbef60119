//! `cluster.env`: shell-style `KEY=value` lines (`/run/slurm-dev/<release>/cluster.env`).

use std::collections::HashMap;
use std::path::Path;

/// Reads `KEY=value` lines (optional `export`, optional quotes, `#` comments); panics
/// naming the file when it cannot be read.
pub fn read_env_file(path: &Path) -> HashMap<String, String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read cluster env file {}: {e}", path.display()));
    parse(&text)
}

fn parse(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("export ").unwrap_or(l).split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            (k.trim().to_string(), v.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn shell_lines_quotes_and_comments() {
        let vars = parse(
            "# written by cargo xtask slurm up\n\
             SLURM_REST_URL=http://127.0.0.1:6824\n\
             export SLURM_USER_NAME=\"root\"\n\
             SLURM_RELEASE='24.11'\n\
             \n\
             SLURM_JWT = a.b.c \n\
             SLURM_COMMENT=\"unbalanced'\n\
             not a setting\n",
        );
        assert_eq!(vars["SLURM_REST_URL"], "http://127.0.0.1:6824");
        assert_eq!(vars["SLURM_USER_NAME"], "root");
        assert_eq!(vars["SLURM_RELEASE"], "24.11");
        assert_eq!(vars["SLURM_JWT"], "a.b.c");
        assert_eq!(vars["SLURM_COMMENT"], "\"unbalanced'");
        assert_eq!(vars.len(), 5, "{vars:?}");
    }
}
