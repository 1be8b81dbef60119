//! Damaged responses never make a decoder panic: every recorded fixture, mutated many ways
//! (fields removed, wrong JSON types, huge and negative numbers, unknown enum strings, `null`
//! for lists, truncated or corrupted bytes, deep nesting), goes through the generated type of
//! its version. Errors are fine; panics are not.
//!
//! The same goes for the client's version-neutral operations (transport checks, envelope,
//! decoding and conversion), fed the mutated bodies by a loopback replay server.
//!
//! Deterministic: a fixed seed per fixture. `SLURM_MUTATION_CASES` (default 24) and
//! `SLURM_MUTATION_CASES_NEUTRAL` (default 12) set the number of mutated bodies per fixture,
//! `SLURM_MUTATION_SEED` changes the seed.

use crate::decoders;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use decoders::{Fixture, RECORDED, decoder, decoders, fixtures, neutral};
use serde_json::{Value, json};

/// splitmix64: small, seedable, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// JSON pointers of every node of `value`, with the node.
fn nodes<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                nodes(child, format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                nodes(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push((at, value));
}

/// Picks a node for which `wanted` holds and hands it to `change`; the description names it.
fn at_random(
    rng: &mut Rng,
    value: &mut Value,
    wanted: fn(&Value) -> bool,
    change: impl FnOnce(&mut Rng, &mut Value) -> String,
) -> String {
    let pointer = {
        let mut all = Vec::new();
        nodes(value, String::new(), &mut all);
        let candidates: Vec<&String> = all
            .iter()
            .filter(|(_, v)| wanted(v))
            .map(|(p, _)| p)
            .collect();
        match rng.pick(&candidates) {
            Some(p) => (*p).clone(),
            None => return "nothing to change".into(),
        }
    };
    let node = value.pointer_mut(&pointer).expect("pointer from the walk");
    format!("{pointer}: {}", change(rng, node))
}

/// One value-level mutation; returns what it did.
fn mutate_value(rng: &mut Rng, value: &mut Value) -> String {
    match rng.below(6) {
        0 => at_random(
            rng,
            value,
            |v| v.as_object().is_some_and(|m| !m.is_empty()),
            |rng, node| {
                let map = node.as_object_mut().expect("object");
                let keys: Vec<String> = map.keys().cloned().collect();
                let key = rng.pick(&keys).expect("non-empty").clone();
                map.remove(&key);
                format!("removed {key}")
            },
        ),
        1 => at_random(
            rng,
            value,
            |_| true,
            |rng, node| {
                let wrong = [
                    Value::Null,
                    json!(true),
                    json!(0),
                    json!(-1),
                    json!("text"),
                    json!([]),
                    json!({}),
                    json!([1, "a", null]),
                    json!({"set": "yes", "number": "many"}),
                ];
                *node = rng.pick(&wrong).expect("non-empty").clone();
                format!("became {node}")
            },
        ),
        2 => at_random(
            rng,
            value,
            |v| v.is_number() || v.is_boolean(),
            |rng, node| {
                let extreme = [
                    json!(u64::MAX),
                    json!(i64::MIN),
                    json!(i64::MAX),
                    json!(-1),
                    json!(4_294_967_296u64),
                    json!(2_147_483_648u64),
                    json!(-2_147_483_649i64),
                    json!(1e308),
                    json!(-1e308),
                    json!(1.8446744073709552e19),
                    json!(0.5),
                ];
                *node = rng.pick(&extreme).expect("non-empty").clone();
                format!("became {node}")
            },
        ),
        3 => at_random(
            rng,
            value,
            |v| v.is_string(),
            |rng, node| {
                let odd = [
                    "STATE_FROM_THE_FUTURE",
                    "",
                    "pending",
                    "ü\u{0}\u{fffd}\u{1f600}",
                    "9999999999999999999999",
                    "-1",
                ];
                *node = json!(rng.pick(&odd).expect("non-empty"));
                format!("became {node}")
            },
        ),
        4 => at_random(
            rng,
            value,
            |v| v.is_array(),
            |rng, node| {
                if rng.below(2) == 0 {
                    *node = Value::Null;
                    "list became null".into()
                } else {
                    node.as_array_mut()
                        .expect("array")
                        .push(json!("FLAG_FROM_THE_FUTURE"));
                    "unknown entry appended".into()
                }
            },
        ),
        _ => at_random(
            rng,
            value,
            |v| v.is_object(),
            |_, node| {
                node.as_object_mut()
                    .expect("object")
                    .insert("field_from_the_future".into(), json!({"nested": [1, 2]}));
                "unknown field added".into()
            },
        ),
    }
}

/// One mutated body and what was done to it.
fn mutate(rng: &mut Rng, body: &[u8], parsed: Option<&Value>) -> (Vec<u8>, String) {
    let byte_level = parsed.is_none() || rng.below(4) == 0;
    if byte_level {
        let at = rng.below(body.len());
        let mut bytes = body.to_vec();
        return match rng.below(3) {
            0 => {
                bytes.truncate(at);
                (bytes, format!("truncated to {at} bytes"))
            }
            1 => {
                let byte = rng.next() as u8;
                bytes[at] = byte;
                (bytes, format!("byte {at} set to {byte:#04x}"))
            }
            _ => {
                bytes.splice(at..at, [0xff, 0xfe]);
                (bytes, format!("invalid UTF-8 inserted at {at}"))
            }
        };
    }
    let mut value = parsed.expect("parsed").clone();
    let mut done = Vec::new();
    for _ in 0..=rng.below(3) {
        done.push(mutate_value(rng, &mut value));
    }
    (
        serde_json::to_vec(&value).expect("serializes"),
        done.join("; "),
    )
}

/// Runs `decode` on `body`; a panic becomes a failure line.
fn check(
    fixture: &Fixture,
    decode: fn(&[u8]) -> Result<(), String>,
    body: &[u8],
    what: &str,
) -> Option<String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| decode(body)));
    outcome.err().map(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("{}: {what}: PANIC {message}", fixture.label())
    })
}

fn seed_for(label: &str) -> u64 {
    // FNV-1a of the label, so each fixture gets its own stable stream.
    let base = env_number("SLURM_MUTATION_SEED", 0x5eed);
    label.bytes().fold(0xcbf2_9ce4_8422_2325 ^ base, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn mutated_responses_never_panic_a_decoder() {
    let cases = env_number("SLURM_MUTATION_CASES", 24);
    let mut failures = Vec::new();
    let mut total = 0;
    for (release, version) in RECORDED {
        if decoders(version).is_none() {
            continue;
        }
        for fixture in fixtures(release, version) {
            let decode = decoder(&fixture).expect("listed in tests/decoders").decode;
            let parsed: Option<Value> = serde_json::from_slice(&fixture.body).ok();
            let mut rng = Rng(seed_for(&fixture.label()));
            for case in 0..cases {
                let (body, what) = mutate(&mut rng, &fixture.body, parsed.as_ref());
                total += 1;
                failures.extend(check(
                    &fixture,
                    decode,
                    &body,
                    &format!("case {case}: {what}"),
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{total} mutated bodies decoded without a panic");
}

#[test]
fn every_decoder_survives_hostile_documents() {
    let deep = "[".repeat(100_000);
    let hostile: [&[u8]; 8] = [
        b"",
        b"null",
        b"[]",
        b"\"jobs\"",
        b"{\"jobs\": {\"jobs\": 1}}",
        b"{\"errors\": [{\"error_number\": 18446744073709551616}]}",
        b"{\"meta\": null, \"errors\": null, \"warnings\": null}",
        deep.as_bytes(),
    ];
    let mut failures = Vec::new();
    for (release, version) in RECORDED {
        if decoders(version).is_none() {
            continue;
        }
        for fixture in fixtures(release, version) {
            let decode = decoder(&fixture).expect("listed in tests/decoders").decode;
            for (i, body) in hostile.iter().enumerate() {
                failures.extend(check(
                    &fixture,
                    decode,
                    body,
                    &format!("hostile document {i}"),
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_responses_never_panic_the_neutral_operations() {
    let cases = env_number("SLURM_MUTATION_CASES_NEUTRAL", 12);
    let mut failures = Vec::new();
    let mut total = 0;
    for (release, version) in RECORDED {
        let Some((fixtures, replay, client)) = neutral::serve(release, version) else {
            continue;
        };
        for fixture in &fixtures {
            if neutral::call(&client, &fixture.name, release)
                .await
                .is_none()
            {
                continue;
            }
            let parsed: Option<Value> = serde_json::from_slice(&fixture.body).ok();
            let mut rng = Rng(seed_for(&format!("neutral {}", fixture.label())));
            for case in 0..cases {
                let (body, what) = mutate(&mut rng, &fixture.body, parsed.as_ref());
                replay.set(&fixture.path, fixture.status, Arc::new(body));
                total += 1;
                let (client, name) = (client.clone(), fixture.name.clone());
                let outcome = tokio::spawn(async move {
                    neutral::call(&client, &name, release)
                        .await
                        .map(|r| r.is_ok())
                })
                .await;
                if let Err(e) = outcome {
                    failures.push(format!(
                        "{}: case {case}: {what}: PANIC {e}",
                        fixture.label()
                    ));
                }
            }
            replay.set(
                &fixture.path,
                fixture.status,
                Arc::new(fixture.body.clone()),
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{total} mutated bodies through the neutral operations without a panic");
}
