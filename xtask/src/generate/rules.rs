//! Whole-document rewrites named in `openapi/overlay.json` (`rules`), one per known class of
//! spec defect. Each returns how many spots it changed; the overlay treats 0 as stale.

use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// `integer`/`int32` becomes `int64`: Slurm labels unsigned 32-bit values `int32`.
    Int32AsInt64,
    /// String enums lose `enum` (their values move into the description): unknown values
    /// from newer releases then decode as plain strings instead of failing.
    EnumsAsStrings,
    /// Every `required` list is dropped: servers omit "required" fields, and some lists
    /// hold invalid entries such as `nodes/count`.
    NoRequired,
    /// Array-valued properties become `nullable`: servers send `null` for empty lists.
    NullableArrays,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Int32AsInt64 => "int32_as_int64",
            Rule::EnumsAsStrings => "enums_as_strings",
            Rule::NoRequired => "no_required",
            Rule::NullableArrays => "nullable_arrays",
        }
    }

    /// Applies the rule to the whole document; returns the number of changes.
    pub fn apply(self, doc: &mut Value) -> usize {
        let mut changed = 0;
        visit_objects(doc, &mut |obj| {
            changed += match self {
                Rule::Int32AsInt64 => int32_as_int64(obj),
                Rule::EnumsAsStrings => enums_as_strings(obj),
                Rule::NoRequired => no_required(obj),
                Rule::NullableArrays => nullable_arrays(obj),
            }
        });
        changed
    }
}

/// Calls `f` on every JSON object in the document, parents before children.
fn visit_objects(value: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    match value {
        Value::Object(obj) => {
            f(obj);
            obj.values_mut().for_each(|v| visit_objects(v, f));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| visit_objects(v, f)),
        _ => {}
    }
}

fn int32_as_int64(obj: &mut Map<String, Value>) -> usize {
    if obj.get("type") == Some(&Value::from("integer"))
        && obj.get("format") == Some(&Value::from("int32"))
    {
        obj.insert("format".into(), "int64".into());
        1
    } else {
        0
    }
}

/// Removes a string `enum` from the schema (or from its array `items`, the usual shape of
/// Slurm's flag lists) and records the known values in the schema's description.
fn enums_as_strings(obj: &mut Map<String, Value>) -> usize {
    let values = match take_string_enum(obj) {
        Some(values) => values,
        None => match obj.get_mut("items").and_then(Value::as_object_mut) {
            Some(items) => match take_string_enum(items) {
                Some(values) => values,
                None => return 0,
            },
            None => return 0,
        },
    };
    let known = format!("Known values: {}.", values.join(", "));
    let description = match obj.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d}\n\n{known}"),
        _ => known,
    };
    obj.insert("description".into(), description.into());
    1
}

fn take_string_enum(obj: &mut Map<String, Value>) -> Option<Vec<String>> {
    let values: Vec<String> = obj
        .get("enum")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect::<Option<_>>()?;
    obj.remove("enum");
    Some(values)
}

fn no_required(obj: &mut Map<String, Value>) -> usize {
    // Parameters and request bodies have a boolean `required`; only schema lists go.
    if obj.get("required").is_some_and(Value::is_array) {
        obj.remove("required");
        1
    } else {
        0
    }
}

fn nullable_arrays(obj: &mut Map<String, Value>) -> usize {
    let Some(Value::Object(properties)) = obj.get_mut("properties") else {
        return 0;
    };
    let mut changed = 0;
    for property in properties.values_mut().filter_map(Value::as_object_mut) {
        if property.get("type") == Some(&Value::from("array"))
            && property.get("nullable") != Some(&Value::Bool(true))
        {
            property.insert("nullable".into(), true.into());
            changed += 1;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int32_becomes_int64_everywhere() {
        let mut doc = json!({"a": {"type": "integer", "format": "int32"}, "b": [{"type": "integer", "format": "int32"}],
                             "c": {"type": "integer", "format": "int64"}});
        assert_eq!(Rule::Int32AsInt64.apply(&mut doc), 2);
        assert_eq!(doc["a"]["format"], "int64");
        assert_eq!(doc["b"][0]["format"], "int64");
    }

    #[test]
    fn enums_become_documented_strings() {
        let mut doc = json!({
            "flags": {"type": "array", "items": {"type": "string", "enum": ["A", "B"]}},
            "mode": {"type": "string", "description": "Mode", "enum": ["X"]},
            "numbers": {"type": "integer", "enum": [1, 2]}
        });
        assert_eq!(Rule::EnumsAsStrings.apply(&mut doc), 2);
        assert_eq!(
            doc["flags"],
            json!({"type": "array", "description": "Known values: A, B.", "items": {"type": "string"}})
        );
        assert_eq!(
            doc["mode"],
            json!({"type": "string", "description": "Mode\n\nKnown values: X."})
        );
        assert_eq!(doc["numbers"]["enum"], json!([1, 2]));
    }

    #[test]
    fn required_lists_go_but_boolean_required_stays() {
        let mut doc = json!({
            "schema": {"type": "object", "required": ["a", "nodes/count"], "properties": {"required": {"type": "string"}}},
            "parameter": {"name": "job_id", "in": "path", "required": true}
        });
        assert_eq!(Rule::NoRequired.apply(&mut doc), 1);
        assert!(doc["schema"].get("required").is_none());
        assert_eq!(
            doc["schema"]["properties"]["required"],
            json!({"type": "string"})
        );
        assert_eq!(doc["parameter"]["required"], true);
    }

    #[test]
    fn array_properties_become_nullable() {
        let mut doc = json!({"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "string"}},
            "named": {"$ref": "#/components/schemas/x"},
            "scalar": {"type": "string"}
        }});
        assert_eq!(Rule::NullableArrays.apply(&mut doc), 1);
        assert_eq!(doc["properties"]["list"]["nullable"], true);
        assert!(doc["properties"]["scalar"].get("nullable").is_none());
    }
}
