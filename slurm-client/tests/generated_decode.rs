//! The generated types decode what real servers send, thanks to openapi/overlay.json:
//! unsigned 32-bit values above i32::MAX, flag/state values this crate has never heard of,
//! `null` lists and omitted "required" fields.

use serde_json::json;

/// A job as slurmrestd prints it, with values the pristine specs reject.
fn job_json(flags: serde_json::Value) -> serde_json::Value {
    json!({
        "job_id": 4_000_000_000u32,
        "user_id": 3_000_000_000u32,
        "priority": { "set": true, "infinite": false, "number": 4_294_967_293u32 },
        "flags": flags,
        "job_state": ["RUNNING", "STATE_FROM_THE_FUTURE"],
        "gres_detail": null
    })
}

fn response(job: serde_json::Value) -> String {
    // `last_backfill`, `last_update` are "required" yet omitted; `warnings` is null.
    json!({ "jobs": [job], "warnings": null, "errors": [] }).to_string()
}

#[cfg(feature = "v0_0_42")]
#[test]
fn v0_0_42_job_info_decodes_unsigned_and_unknown_values() {
    use slurm_client::v0_0_42::types::V0042OpenapiJobInfoResp;

    let text = response(job_json(json!(["CRON_JOB", "FLAG_FROM_THE_FUTURE"])));
    let decoded: V0042OpenapiJobInfoResp =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(&text))
            .unwrap_or_else(|e| panic!("{}: {e}", e.path()));
    let job = &decoded.jobs.as_ref().expect("jobs")[0];
    assert_eq!(job.job_id, Some(4_000_000_000));
    assert_eq!(job.user_id, Some(3_000_000_000));
    assert_eq!(
        job.priority.as_ref().and_then(|p| p.number),
        Some(4_294_967_293)
    );
    assert_eq!(
        job.flags.as_ref().unwrap().0,
        ["CRON_JOB", "FLAG_FROM_THE_FUTURE"]
    );
    assert_eq!(
        job.job_state.as_ref().unwrap().0,
        ["RUNNING", "STATE_FROM_THE_FUTURE"]
    );
    assert!(decoded.last_update.is_none());

    // A `null` list decodes as absent.
    let text = response(job_json(serde_json::Value::Null));
    let decoded: V0042OpenapiJobInfoResp = serde_json::from_str(&text).unwrap();
    assert!(decoded.jobs.unwrap()[0].flags.is_none());
}

#[cfg(feature = "v0_0_43")]
#[test]
fn v0_0_43_job_info_decodes_unsigned_and_unknown_values() {
    use slurm_client::v0_0_43::types::V0043OpenapiJobInfoResp;

    let text = response(job_json(json!(["CRON_JOB", "FLAG_FROM_THE_FUTURE"])));
    let decoded: V0043OpenapiJobInfoResp =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(&text))
            .unwrap_or_else(|e| panic!("{}: {e}", e.path()));
    let job = &decoded.jobs.as_ref().expect("jobs")[0];
    assert_eq!(job.user_id, Some(3_000_000_000));
    assert_eq!(
        job.priority.as_ref().and_then(|p| p.number),
        Some(4_294_967_293)
    );
    // v0.0.43 inlines flag lists: they are plain `Option<Vec<String>>`.
    assert_eq!(
        job.flags.as_deref(),
        Some(&["CRON_JOB".to_string(), "FLAG_FROM_THE_FUTURE".to_string()][..])
    );

    let text = response(job_json(serde_json::Value::Null));
    let decoded: V0043OpenapiJobInfoResp = serde_json::from_str(&text).unwrap();
    assert!(decoded.jobs.unwrap()[0].flags.is_none());
}

/// `GET jobs/state/` sends string job ids; the overlay gives it its own schema.
#[cfg(feature = "v0_0_42")]
#[test]
fn v0_0_42_job_states_have_string_ids() {
    use slurm_client::v0_0_42::types::V0042OpenapiJobStateResp;

    let text = r#"{"jobs": [{"job_id": "12_3", "state": ["RUNNING"]}], "meta": {}, "errors": [], "warnings": []}"#;
    let decoded: V0042OpenapiJobStateResp = serde_json::from_str(text).unwrap();
    let job = &decoded.jobs.unwrap()[0];
    assert_eq!(job.job_id.as_deref(), Some("12_3"));
    assert_eq!(job.state.as_deref(), Some(&["RUNNING".to_string()][..]));
}
