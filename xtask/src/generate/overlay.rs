//! The reviewed fixes applied to the pristine slurmrestd specs before code generation.
//!
//! `openapi/overlay.json` holds two kinds of entries (each with a `why`, see openapi/README.md):
//! - `rules`: named whole-document rewrites (see [`super::rules`]), applied to every version;
//! - `patches`: JSON-pointer edits for single spots, with `{v}` in `path`/`from`/`value`
//!   standing for the version (`v0.0.42`).
//!
//! A stale overlay is an error, never silently ignored: a rule that changes nothing in any
//! version, an `add` whose key already exists, or a `replace`/`remove` whose target is missing
//! fails generation.

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use serde_json::Value;

use super::rules::Rule;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overlay {
    #[serde(rename = "$comment", default)]
    _comment: Option<String>,
    rules: Vec<RuleEntry>,
    patches: Vec<Patch>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    rule: Rule,
    #[allow(dead_code)] // documentation for reviewers
    why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Patch {
    /// Versions the patch applies to, e.g. `["v0.0.40", "v0.0.42"]`.
    versions: Vec<String>,
    op: Op,
    /// RFC 6901 JSON pointer; `{v}` is replaced by the version.
    path: String,
    /// For `copy`: where the value comes from (a JSON pointer).
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    value: Option<Value>,
    #[allow(dead_code)] // documentation for reviewers
    why: String,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Op {
    /// Adds a key that must not exist yet (its parent must).
    Add,
    /// Replaces a value that must exist.
    Replace,
    /// Removes a value that must exist.
    Remove,
    /// Copies the value at `from` (which must exist) to a key that must not exist yet.
    Copy,
}

/// What applying the overlay changed, for the generator's log.
#[derive(Debug, Default)]
pub struct Applied {
    pub lines: Vec<String>,
    /// Changes per rule, in overlay order.
    pub rule_changes: Vec<usize>,
}

impl Overlay {
    pub fn parse(text: &str) -> Result<Self> {
        let overlay: Self = serde_json::from_str(text).context("invalid overlay")?;
        for patch in &overlay.patches {
            ensure!(
                patch.path.starts_with('/'),
                "overlay patch path `{}` is not a JSON pointer (must start with `/`)",
                patch.path
            );
            let (needs_value, needs_from) = match patch.op {
                Op::Add | Op::Replace => (true, false),
                Op::Remove => (false, false),
                Op::Copy => (false, true),
            };
            ensure!(
                needs_value == patch.value.is_some() && needs_from == patch.from.is_some(),
                "overlay patch `{}`: `{:?}` takes {}",
                patch.path,
                patch.op,
                match patch.op {
                    Op::Add | Op::Replace => "a `value` and no `from`",
                    Op::Remove => "neither `value` nor `from`",
                    Op::Copy => "a `from` and no `value`",
                }
            );
            ensure!(
                !patch.versions.is_empty(),
                "overlay patch `{}` lists no versions",
                patch.path
            );
        }
        Ok(overlay)
    }

    /// Applies the patches (first, so they see the pristine document), then the rules.
    pub fn apply(&self, version: &str, spec: &mut Value) -> Result<Applied> {
        let mut applied = Applied::default();
        for patch in self
            .patches
            .iter()
            .filter(|p| p.versions.iter().any(|v| v == version))
        {
            let path = patch.path.replace("{v}", version);
            let value = match &patch.from {
                Some(from) => {
                    let from = from.replace("{v}", version);
                    let value = spec.pointer(&from).cloned().with_context(|| {
                        format!("copy source `{from}` does not exist in {version} (stale overlay?)")
                    })?;
                    Some(value)
                }
                None => patch.value.as_ref().map(|v| substitute(v, version)),
            };
            let op = if patch.op == Op::Copy {
                Op::Add
            } else {
                patch.op
            };
            apply_patch(spec, op, &path, value)
                .with_context(|| format!("overlay patch {:?} {path} in {version}", patch.op))?;
            applied.lines.push(format!("{:?} {path}", patch.op));
        }
        for entry in &self.rules {
            let changed = entry.rule.apply(spec);
            applied
                .lines
                .push(format!("{}: {changed} change(s)", entry.rule.name()));
            applied.rule_changes.push(changed);
        }
        Ok(applied)
    }

    /// Fails if a rule changed nothing in any of the versions it was applied to.
    pub fn check_rules_used(&self, applied: &[Applied]) -> Result<()> {
        for (index, entry) in self.rules.iter().enumerate() {
            let total: usize = applied.iter().map(|a| a.rule_changes[index]).sum();
            ensure!(
                total > 0,
                "overlay rule `{}` changed nothing in any spec: the defect is gone, remove the rule",
                entry.rule.name()
            );
        }
        Ok(())
    }

    /// Versions named by patches, to catch typos such as `v0.0.4`.
    pub fn patch_versions(&self) -> impl Iterator<Item = &str> {
        self.patches
            .iter()
            .flat_map(|p| p.versions.iter().map(String::as_str))
    }
}

fn substitute(value: &Value, version: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace("{v}", version)),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, version)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.replace("{v}", version), substitute(v, version)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn apply_patch(doc: &mut Value, op: Op, path: &str, value: Option<Value>) -> Result<()> {
    let (parent_path, key) = path.rsplit_once('/').context("empty pointer")?;
    let key = key.replace("~1", "/").replace("~0", "~");
    let parent = doc
        .pointer_mut(parent_path)
        .with_context(|| format!("`{parent_path}` does not exist (stale overlay?)"))?;
    match parent {
        Value::Object(map) => {
            let exists = map.contains_key(&key);
            match (op, value) {
                (Op::Add, Some(value)) => {
                    ensure!(!exists, "`{path}` already exists (stale overlay?)");
                    map.insert(key, value);
                }
                (Op::Replace, Some(value)) => {
                    ensure!(exists, "`{path}` does not exist (stale overlay?)");
                    map.insert(key, value);
                }
                (Op::Remove, None) => {
                    ensure!(exists, "`{path}` does not exist (stale overlay?)");
                    map.remove(&key);
                }
                _ => unreachable!("checked in Overlay::parse"),
            }
        }
        Value::Array(items) => {
            let index: usize = key
                .parse()
                .with_context(|| format!("`{key}` is not an array index in `{path}`"))?;
            ensure!(
                index < items.len(),
                "`{path}` does not exist (stale overlay?)"
            );
            match (op, value) {
                (Op::Replace, Some(value)) => items[index] = value,
                (Op::Remove, None) => {
                    items.remove(index);
                }
                (Op::Add, _) => bail!("`add` into arrays is not supported (`{path}`)"),
                _ => unreachable!("checked in Overlay::parse"),
            }
        }
        _ => bail!("`{parent_path}` is neither an object nor an array"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn overlay(patches: Value) -> Overlay {
        Overlay::parse(&json!({ "rules": [], "patches": patches }).to_string()).unwrap()
    }

    #[test]
    fn add_sets_title_with_version() {
        let o = overlay(json!([{
            "versions": ["v0.0.42"], "op": "add", "why": "test",
            "path": "/components/schemas/{v}_job_res/properties/nodes/title",
            "value": "{v}_job_res_nodes_summary"
        }]));
        let mut doc =
            json!({"components": {"schemas": {"v0.0.42_job_res": {"properties": {"nodes": {}}}}}});
        o.apply("v0.0.42", &mut doc).unwrap();
        assert_eq!(
            doc.pointer("/components/schemas/v0.0.42_job_res/properties/nodes/title"),
            Some(&json!("v0.0.42_job_res_nodes_summary"))
        );
        // Other versions are untouched.
        let mut other = json!({});
        o.apply("v0.0.43", &mut other).unwrap();
        assert_eq!(other, json!({}));
    }

    #[test]
    fn copy_duplicates_a_value() {
        let o = overlay(json!([{
            "versions": ["v1"], "op": "copy", "why": "test",
            "from": "/a/{v}", "path": "/b/{v}"
        }]));
        let mut doc = json!({"a": {"v1": {"x": 1}}, "b": {}});
        o.apply("v1", &mut doc).unwrap();
        assert_eq!(doc["b"]["v1"], json!({"x": 1}));
        let err = o.apply("v1", &mut json!({"a": {}, "b": {}})).unwrap_err();
        assert!(
            format!("{err:#}").contains("copy source `/a/v1` does not exist"),
            "{err:#}"
        );
    }

    #[test]
    fn stale_patches_fail() {
        let add = overlay(
            json!([{ "versions": ["v1"], "op": "add", "path": "/a/b", "value": 1, "why": "" }]),
        );
        let err = add.apply("v1", &mut json!({"a": {"b": 0}})).unwrap_err();
        assert!(format!("{err:#}").contains("already exists"), "{err:#}");
        let err = add.apply("v1", &mut json!({})).unwrap_err();
        assert!(
            format!("{err:#}").contains("`/a` does not exist"),
            "{err:#}"
        );

        let remove =
            overlay(json!([{ "versions": ["v1"], "op": "remove", "path": "/a/0", "why": "" }]));
        let err = remove.apply("v1", &mut json!({"a": []})).unwrap_err();
        assert!(format!("{err:#}").contains("does not exist"), "{err:#}");
    }

    #[test]
    fn rule_that_changes_nothing_fails() {
        let o =
            Overlay::parse(r#"{"rules": [{"rule": "int32_as_int64", "why": ""}], "patches": []}"#)
                .unwrap();
        let used = o
            .apply("v1", &mut json!({"type": "integer", "format": "int32"}))
            .unwrap();
        let unused = o
            .apply("v2", &mut json!({"type": "integer", "format": "int64"}))
            .unwrap();
        o.check_rules_used(&[used]).unwrap();
        let err = o.check_rules_used(&[unused]).unwrap_err();
        assert!(format!("{err:#}").contains("changed nothing"), "{err:#}");
    }

    #[test]
    fn bad_overlay_is_rejected() {
        assert!(
            Overlay::parse(r#"{"rules": [{"rule": "no_such_rule", "why": ""}], "patches": []}"#)
                .is_err()
        );
        assert!(Overlay::parse(r#"{"rules": [], "patches": [{"versions": ["v1"], "op": "add", "path": "x", "value": 1, "why": ""}]}"#).is_err());
        assert!(Overlay::parse(r#"{"rules": [], "patches": [{"versions": ["v1"], "op": "remove", "path": "/x", "value": 1, "why": ""}]}"#).is_err());
    }
}
