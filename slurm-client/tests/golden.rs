//! Golden tests: every recorded slurmrestd response (`tests/fixtures/`, re-recorded with
//! `cargo xtask fixtures record`) decodes into the generated type of its REST version,
//! decoding drops none of the fields the server sent, and the client's version-neutral
//! operations (its own transport, decoding and conversion, fed by a loopback replay of the
//! recordings) turn them into the model types. Versions whose cargo feature is off are
//! skipped (`cargo test --all-features` checks them all).

use crate::decoders;

use std::collections::BTreeSet;

use decoders::{Fixture, RECORDED, decoder, decoders, fixtures, neutral};
use serde_json::Value;
use slurm_client::Error;

/// The fixtures of every compiled-in version.
fn compiled_fixtures() -> Vec<Fixture> {
    RECORDED
        .iter()
        .filter(|(_, version)| decoders(version).is_some())
        .flat_map(|(release, version)| fixtures(release, version))
        .collect()
}

#[test]
fn every_fixture_decodes_into_its_generated_type() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for fixture in compiled_fixtures() {
        let Some(decode) = decoder(&fixture) else {
            failures.push(format!(
                "{}: no generated type listed in tests/decoders/mod.rs",
                fixture.label()
            ));
            continue;
        };
        checked += 1;
        match ((decode.decode)(&fixture.body), &fixture.invalid_json) {
            (Ok(_), None) => {}
            (Err(e), None) => failures.push(format!("{}: {e}", fixture.label())),
            // slurmrestd sent invalid JSON (bare `Infinity`): a clear error, never a panic.
            (Err(e), Some(_)) => assert!(!e.is_empty(), "{}", fixture.label()),
            (Ok(_), Some(why)) => failures.push(format!(
                "{}: recorded as invalid JSON ({why}) yet decodes",
                fixture.label()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{checked} fixtures decoded");
}

#[test]
fn every_listed_type_has_a_fixture() {
    for (_, version) in RECORDED {
        let Some(table) = decoders(version) else {
            continue;
        };
        let recorded: BTreeSet<String> = RECORDED
            .iter()
            .filter(|(_, v)| v == version)
            .flat_map(|(release, v)| fixtures(release, v))
            .map(|f| f.name)
            .collect();
        for decoder in table {
            let name = decoder.name;
            assert!(
                recorded.contains(name),
                "{version}: {name} is listed in tests/decoders/mod.rs but was never recorded"
            );
        }
    }
}

#[test]
fn decoding_keeps_every_field_the_server_sent() {
    let mut lost = Vec::new();
    for fixture in compiled_fixtures() {
        if fixture.invalid_json.is_some() {
            continue;
        }
        let decode = decoder(&fixture).expect("listed");
        let original: Value = serde_json::from_slice(&fixture.body).expect("JSON");
        let decoded = (decode.round_trip)(&fixture.body).expect("decodes");
        let mut paths = BTreeSet::new();
        missing(&original, &decoded, String::new(), &mut paths);
        if !paths.is_empty() {
            lost.push(format!(
                "{}: {}",
                fixture.label(),
                paths.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "fields the generated types drop or change (not in the spec?):\n{}",
        lost.join("\n")
    );
}

/// Collects the paths (array indices as `[]`) where `decoded` lacks or changed a non-null
/// value of `original`. Numbers compare by value (`5` equals `5.0`).
fn missing(original: &Value, decoded: &Value, path: String, out: &mut BTreeSet<String>) {
    match (original, decoded) {
        (Value::Null, _) => {}
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let at = format!("{path}/{key}");
                match b.get(key) {
                    Some(other) => missing(value, other, at, out),
                    // Serialization leaves out empty maps (e.g. deprecated `power: {}`).
                    None if value.is_null() || value == &Value::Object(Default::default()) => {}
                    None => {
                        out.insert(at);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (x, y) in a.iter().zip(b) {
                missing(x, y, format!("{path}[]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        _ => {
            out.insert(format!("{path} (changed)"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_converts_into_the_neutral_types() {
    let mut failures = Vec::new();
    let mut converted = 0;
    for (release, version) in RECORDED {
        let Some((fixtures, _replay, client)) = neutral::serve(release, version) else {
            continue;
        };
        for fixture in &fixtures {
            let Some(result) = neutral::call(&client, &fixture.name, release).await else {
                continue;
            };
            converted += 1;
            match result {
                Ok(value) => failures.extend(
                    what_is_wrong(&fixture.name, &value)
                        .map(|w| format!("{}: {w}", fixture.label())),
                ),
                Err(e) => failures.push(format!("{}: {e}", fixture.label())),
            }
        }
        match client.get_job(999_999).await {
            Err(Error::NotFound { .. }) => {}
            other => failures.push(format!(
                "{release}/{version}: unknown job gave {:?} instead of NotFound",
                other.map(|r| r.value.id)
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{converted} fixtures converted");
}

/// Spot checks of what the recording is known to contain.
fn what_is_wrong(name: &str, value: &Value) -> Option<String> {
    let count = |list: &Value| list.as_array().map_or(0, Vec::len);
    let known_states = ["PENDING", "RUNNING", "COMPLETED", "FAILED"];
    match name {
        "slurm_jobs" => {
            let jobs = &value["jobs"];
            if count(jobs) != 7 {
                return Some(format!("{} jobs, expected 7", count(jobs)));
            }
            let states: Vec<&str> = jobs
                .as_array()?
                .iter()
                .filter_map(|j| j["state"].as_str())
                .collect();
            (states.len() != 7 || states.iter().any(|s| !known_states.contains(s)))
                .then(|| format!("job states {states:?}"))
        }
        "slurm_job_array" => {
            (count(value) != 3).then(|| format!("{} array tasks, expected 3", count(value)))
        }
        "slurm_nodes" => (count(&value["nodes"]) != 4)
            .then(|| format!("{} nodes, expected 4", count(&value["nodes"]))),
        "slurm_licenses" => {
            (count(value) != 2).then(|| format!("{} licenses, expected 2", count(value)))
        }
        "slurm_ping" => {
            let mode = &value["controllers"][0]["mode"];
            (mode != "primary").then(|| format!("controller mode {mode}"))
        }
        // alice has no usage: her level is infinite in every spelling Slurm uses for it.
        "slurm_shares" => {
            let alice = value["shares"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "alice")?;
            (alice["fairshare_level"] != "infinite")
                .then(|| format!("alice's fair-share level {}", alice["fairshare_level"]))
        }
        "slurmdb_jobs" => {
            (count(value) != 6).then(|| format!("{} job records, expected 6", count(value)))
        }
        _ => None,
    }
}
