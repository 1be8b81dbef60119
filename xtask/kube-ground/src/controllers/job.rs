//! Job: pods from the template until `completions` succeeded (at most `parallelism` at once),
//! Failed after more than `backoffLimit` failed pods or past `activeDeadlineSeconds`, with the
//! counters, startTime/completionTime and the Complete/Failed (and SuccessCriteriaMet/
//! FailureTarget) conditions of batch/v1.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use super::common;

pub async fn run(client: Client) -> anyhow::Result<()> {
    common::run::<Job, _, _>(client, "job", reconcile).await
}

async fn reconcile(job: Arc<Job>, client: Client) -> anyhow::Result<()> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let st = job.status.clone().unwrap_or_default();
    let done = st
        .conditions
        .iter()
        .flatten()
        .any(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True");
    if done {
        return Ok(());
    }
    let ns = job.namespace().unwrap_or_default();
    let uid = job.uid().unwrap_or_default();
    let spec = job.spec.clone().unwrap_or_default();
    let completions = spec.completions.unwrap_or(1);
    let parallelism = spec.parallelism.unwrap_or(1);
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let pods = common::owned_pods(&client, &ns, &uid, spec.selector.as_ref()).await?;
    let succeeded = pods
        .iter()
        .filter(|p| common::phase(p) == "Succeeded")
        .count() as i32;
    let failed = pods.iter().filter(|p| common::phase(p) == "Failed").count() as i32;
    let active: Vec<&Pod> = pods.iter().filter(|p| common::active(p)).collect();
    let start = st
        .start_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or_else(Timestamp::now);
    let past_deadline = spec
        .active_deadline_seconds
        .is_some_and(|s| Timestamp::now().as_second() - start.as_second() >= s);
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let now = Timestamp::now().to_string();
    let mut conditions = Vec::new();
    let mut completion_time = None;
    if succeeded >= completions {
        completion_time = Some(now.clone());
        for (t, reason) in [
            ("SuccessCriteriaMet", "CompletionsReached"),
            ("Complete", "CompletionsReached"),
        ] {
            conditions.push(serde_json::json!({"type": t, "status": "True", "reason": reason, "lastTransitionTime": now, "lastProbeTime": now}));
        }
    } else if failed > backoff_limit || past_deadline {
        let (reason, message) = if past_deadline {
            (
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            )
        } else {
            (
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
        };
        for p in &active {
            common::benign(api.delete(&p.name_any(), &DeleteParams::default()).await)?;
        }
        for t in ["FailureTarget", "Failed"] {
            conditions.push(serde_json::json!({"type": t, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now, "lastProbeTime": now}));
        }
    } else {
        let wanted = parallelism.min(completions - succeeded).max(0) as usize;
        let labels = BTreeMap::from([
            ("batch.kubernetes.io/job-name".to_string(), job.name_any()),
            ("job-name".to_string(), job.name_any()),
            (
                "batch.kubernetes.io/controller-uid".to_string(),
                uid.clone(),
            ),
            ("controller-uid".to_string(), uid.clone()),
        ]);
        for _ in active.len()..wanted {
            let template = spec.template.clone();
            let pod = common::pod_from_template(
                &template,
                common::owner_ref(job.as_ref()),
                None,
                Some(format!("{}-", job.name_any())),
                labels.clone(),
            );
            api.create(&PostParams::default(), &pod).await?;
        }
    }
    let mut status = serde_json::json!({
        "active": active.len(),
        "succeeded": succeeded,
        "failed": failed,
        "ready": active.iter().filter(|p| common::ready(p)).count(),
        "startTime": Timestamp::from_second(start.as_second())?.to_string(),
    });
    if !conditions.is_empty() {
        status["conditions"] = serde_json::Value::Array(conditions);
        status["active"] = 0.into();
    }
    if let Some(t) = completion_time {
        status["completionTime"] = t.into();
    }
    Api::<Job>::namespaced(client, &ns)
        .patch_status(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"status": status})),
        )
        .await?;
    Ok(())
}
