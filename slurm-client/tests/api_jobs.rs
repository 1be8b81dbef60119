//! Jobs through the version-neutral API, for every REST version each cluster serves.

use crate::support;

use slurm_client::{
    ApiVersion, Error, JobFlag, JobQuery, JobState, JobSubmission, JobUpdate, Limit,
};
use support::{targets, wait_for_state};

#[tokio::test]
async fn submit_run_complete_and_list() {
    for t in targets().await {
        let label = t.label();
        let submitted = t
            .client
            .submit_job(&t.quick_job("complete", 2).comment("from the api test"))
            .await
            .unwrap_or_else(|e| panic!("{label}: submit: {e}"))
            .value;
        assert!(submitted.job_id > 0, "{label}");

        let running = wait_for_state(
            &t,
            submitted.job_id,
            &[JobState::Running, JobState::Completed],
        )
        .await;
        assert_eq!(running.name, t.job_name("complete"), "{label}");
        assert_eq!(running.partition.as_deref(), Some("debug"), "{label}");
        assert_eq!(running.user, "root", "{label}");
        assert_eq!(running.user_id, Some(0), "{label}");
        assert_eq!(
            running.comment.as_deref(),
            Some("from the api test"),
            "{label}"
        );
        assert_eq!(
            running.working_directory.as_deref(),
            Some("/tmp"),
            "{label}"
        );
        assert_eq!(running.time_limit_minutes, Limit::Value(5), "{label}");
        assert!(
            running.submit_time.is_some() && running.start_time.is_some(),
            "{label}: {running:?}"
        );
        assert!(
            running.cpus.value().unwrap_or(0) >= 1,
            "{label}: {running:?}"
        );
        assert!(running.priority.is_value(), "{label}: {running:?}");
        assert!(running.batch, "{label}");
        assert!(
            running.nodes.is_some() && running.batch_host.is_some(),
            "{label}: {running:?}"
        );
        assert!(
            running.tres_allocated.count("cpu").unwrap_or(0) >= 1,
            "{label}: {running:?}"
        );

        let listed = t
            .client
            .list_jobs(&JobQuery::new().name(t.job_name("complete")))
            .await
            .unwrap()
            .value;
        assert!(
            listed.jobs.iter().any(|j| j.id == submitted.job_id),
            "{label}: {listed:?}"
        );
        assert!(
            listed.jobs.iter().all(|j| j.name == t.job_name("complete")),
            "{label}"
        );
        assert!(listed.last_update.is_some() && !listed.unchanged, "{label}");

        let done = wait_for_state(&t, submitted.job_id, &[JobState::Completed]).await;
        let exit = done
            .exit_code
            .clone()
            .expect("exit code of a completed job");
        assert_eq!(exit.return_code, Some(0), "{label}: {done:?}");
        assert!(done.end_time.is_some(), "{label}");
        assert!(!done.has_flag(&JobFlag::Requeued), "{label}");
        assert!(done.state.is_finished());
    }
}

#[tokio::test]
async fn cancel_and_signal() {
    for t in targets().await {
        let label = t.label();
        let id = t
            .client
            .submit_job(&t.quick_job("cancel", 300))
            .await
            .unwrap()
            .value
            .job_id;
        wait_for_state(&t, id, &[JobState::Running]).await;
        // CONT, whose default action is to carry on: USR1 or TERM would end `sleep`, and
        // with it the job, racing the cancel below ("already completing", error 2021).
        t.client
            .signal_job(id, "CONT")
            .await
            .unwrap_or_else(|e| panic!("{label}: signal: {e}"));
        t.client
            .cancel_job(id)
            .await
            .unwrap_or_else(|e| panic!("{label}: cancel: {e}"));
        let job = wait_for_state(&t, id, &[JobState::Cancelled]).await;
        assert!(job.state.is_finished(), "{label}");
        let err = t.client.signal_job(id, "not a signal").await.unwrap_err();
        assert_eq!(err.label(), "config", "{label}: {err}");
    }
}

#[tokio::test]
async fn resource_layout_of_a_running_job() {
    for t in targets().await {
        let label = t.label();
        let held = t
            .client
            .submit_job(&t.quick_job("layout-held", 1).hold(true))
            .await
            .unwrap()
            .value
            .job_id;
        if t.version < ApiVersion::V0_0_44 {
            match t.client.job_layout(held).await {
                Err(Error::Unsupported {
                    version, operation, ..
                }) => {
                    assert_eq!(version, t.version, "{label}");
                    assert_eq!(operation, "job resource layout", "{label}");
                }
                other => panic!("{label}: {other:?}"),
            }
            t.client.cancel_job(held).await.unwrap();
            continue;
        }
        let id = t
            .client
            .submit_job(&t.quick_job("layout", 300))
            .await
            .unwrap()
            .value
            .job_id;
        let job = wait_for_state(&t, id, &[JobState::Running]).await;
        let layout = t
            .client
            .job_layout(id)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"))
            .value;
        let nodes: Vec<&str> = layout.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(
            Some(slurm_client::hostlist::compress(&nodes)),
            job.nodes,
            "{label}: {layout:?}"
        );
        assert!(
            layout.iter().all(|n| n.core_bitmap.is_some()),
            "{label}: {layout:?}"
        );
        // Slurm answers for running jobs only.
        let err = t.client.job_layout(held).await.unwrap_err();
        assert!(err.to_string().contains("not running"), "{label}: {err}");
        for id in [id, held] {
            t.client.cancel_job(id).await.unwrap();
        }
    }
}

#[tokio::test]
async fn hold_release_and_update() {
    for t in targets().await {
        let label = t.label();
        let id = t
            .client
            .submit_job(&t.quick_job("hold", 1).hold(true))
            .await
            .unwrap()
            .value
            .job_id;
        let held = t.client.get_job(id).await.unwrap().value;
        assert_eq!(held.state, JobState::Pending, "{label}");
        assert!(held.held, "{label}: {held:?}");
        assert_eq!(held.priority, Limit::Value(0), "{label}");

        let update = JobUpdate::default()
            .time_limit_minutes(Limit::Value(7))
            .comment("updated");
        t.client
            .update_job(id, &update)
            .await
            .unwrap_or_else(|e| panic!("{label}: update: {e}"));
        let updated = t.client.get_job(id).await.unwrap().value;
        assert_eq!(updated.time_limit_minutes, Limit::Value(7), "{label}");
        assert_eq!(updated.comment.as_deref(), Some("updated"), "{label}");

        t.client
            .release_job(id)
            .await
            .unwrap_or_else(|e| panic!("{label}: release: {e}"));
        let released = t.client.get_job(id).await.unwrap().value;
        assert!(!released.held, "{label}: {released:?}");
        wait_for_state(&t, id, &[JobState::Running, JobState::Completed]).await;

        let id2 = t
            .client
            .submit_job(&t.quick_job("hold2", 1).hold(true))
            .await
            .unwrap()
            .value
            .job_id;
        t.client.hold_job(id2).await.unwrap();
        assert!(t.client.get_job(id2).await.unwrap().value.held, "{label}");
        t.client.cancel_job(id2).await.unwrap();
    }
}

#[tokio::test]
async fn requeue_where_supported() {
    for t in targets().await {
        let label = t.label();
        let id = t
            .client
            .submit_job(&t.quick_job("requeue", 300))
            .await
            .unwrap()
            .value
            .job_id;
        wait_for_state(&t, id, &[JobState::Running]).await;
        match t.client.requeue_job(id).await {
            Ok(_) => {
                assert!(t.version >= ApiVersion::V0_0_45, "{label}");
                let job = t.client.get_job(id).await.unwrap().value;
                assert!(
                    job.has_flag(&JobFlag::Requeued)
                        || job.state == JobState::Pending
                        || job.restart_count > 0,
                    "{label}: {job:?}"
                );
            }
            Err(Error::Unsupported { version, .. }) => {
                assert!(t.version < ApiVersion::V0_0_45, "{label}");
                assert_eq!(version, t.version);
            }
            Err(e) => panic!("{label}: requeue: {e}"),
        }
        t.client.cancel_job(id).await.unwrap();
    }
}

#[tokio::test]
async fn unknown_job_is_not_found() {
    for t in targets().await {
        let label = t.label();
        let err = t.client.get_job(4_000_000_000).await.unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
        let err = t.client.cancel_job(4_000_000_000).await.unwrap_err();
        assert_eq!(err.label(), "not_found", "{label}: {err}");
    }
}

#[tokio::test]
async fn rejected_submission_keeps_slurm_errors() {
    for t in targets().await {
        let label = t.label();
        let job = t.quick_job("rejected", 1).partition("no-such-partition");
        let err = t.client.submit_job(&job).await.unwrap_err();
        assert!(matches!(err, Error::Rejected { .. }), "{label}: {err:?}");
        assert!(!err.slurm_errors().is_empty(), "{label}: {err:?}");
        let text = err.to_string();
        assert!(text.to_lowercase().contains("partition"), "{label}: {text}");

        let err = t
            .client
            .submit_job(&JobSubmission::script("no shebang"))
            .await
            .unwrap_err();
        assert_eq!(err.label(), "config", "{label}: {err}");
    }
}

/// An external job (`EXTERNAL_JOB`, REST v0.0.43+) holds an allocation with nothing
/// launched in it, the placeholder a scheduler outside Slurm places its work on. Older
/// versions refuse it before sending anything.
#[tokio::test]
async fn external_job_holds_an_allocation() {
    for t in targets().await {
        let label = t.label();
        let name = t.job_name("external");
        let pods = r#"{"pods":["ns/a"]}"#;
        let job = JobSubmission::external_job()
            .name(&name)
            .partition("debug")
            .min_nodes(1)
            .working_directory("/tmp")
            .exclusive(true)
            .admin_comment(pods)
            .mcs_label("kubernetes");
        let id = match t.client.submit_job(&job).await {
            Ok(submitted) => {
                assert!(t.version >= ApiVersion::V0_0_43, "{label}");
                submitted.value.job_id
            }
            Err(Error::Unsupported {
                operation,
                version,
                release,
            }) => {
                assert!(t.version < ApiVersion::V0_0_43, "{label}");
                assert_eq!(operation, "external job submission", "{label}");
                assert_eq!(version, t.version, "{label}");
                assert!(release.is_some(), "{label}");
                let listed = t
                    .client
                    .list_jobs(&JobQuery::new().name(&name))
                    .await
                    .unwrap()
                    .value;
                assert!(listed.jobs.is_empty(), "{label}: {listed:?}");
                continue;
            }
            Err(e) => panic!("{label}: submit: {e:?}"),
        };
        let running = wait_for_state(&t, id, &[JobState::Running]).await;
        assert!(running.nodes.is_some(), "{label}: {running:?}");
        assert!(!running.batch, "{label}: {running:?}");
        assert!(running.is_external(), "{label}: {:?}", running.flags);
        assert_eq!(running.admin_comment.as_deref(), Some(pods), "{label}");
        assert_eq!(running.mcs_label.as_deref(), Some("kubernetes"), "{label}");
        assert_eq!(running.node_count, Limit::Value(1), "{label}: {running:?}");
        // Exclusive: every CPU of the node.
        assert_eq!(
            running.tres_allocated.count("cpu"),
            Some(4),
            "{label}: {running:?}"
        );

        let more = r#"{"pods":["ns/a","ns/b"]}"#;
        t.client
            .update_job(id, &JobUpdate::default().admin_comment(more))
            .await
            .unwrap_or_else(|e| panic!("{label}: update: {e}"));
        let updated = t.client.get_job(id).await.unwrap().value;
        assert_eq!(updated.admin_comment.as_deref(), Some(more), "{label}");
        assert_eq!(updated.state, JobState::Running, "{label}: {updated:?}");

        t.client
            .cancel_job(id)
            .await
            .unwrap_or_else(|e| panic!("{label}: cancel: {e}"));
        wait_for_state(&t, id, &[JobState::Cancelled]).await;
    }
}

/// The submission fields a placeholder job uses, read back, and the update of the ones
/// that change while it waits.
#[tokio::test]
async fn submission_fields_read_back() {
    for t in targets().await {
        let label = t.label();
        let job = t
            .quick_job("fields", 1)
            .hold(true)
            .admin_comment("placeholder")
            .mcs_label("kubernetes")
            .exclude_node("node4")
            .min_nodes(1)
            .max_nodes(2)
            .tasks_per_node(1)
            .licenses("matlab:1")
            .user_id(0)
            .group_id(0);
        let id = t
            .client
            .submit_job(&job)
            .await
            .unwrap_or_else(|e| panic!("{label}: submit: {e:?}"))
            .value
            .job_id;
        let held = t.client.get_job(id).await.unwrap().value;
        assert_eq!(
            held.admin_comment.as_deref(),
            Some("placeholder"),
            "{label}"
        );
        assert_eq!(held.excluded_nodes.as_deref(), Some("node4"), "{label}");
        // Accepted and kept although the test clusters set no MCSPlugin.
        assert_eq!(held.mcs_label.as_deref(), Some("kubernetes"), "{label}");
        assert_eq!(held.licenses.as_deref(), Some("matlab:1"), "{label}");
        assert_eq!((held.user_id, held.group_id), (Some(0), Some(0)), "{label}");
        assert!(!held.is_external(), "{label}: {:?}", held.flags);

        let update = JobUpdate::default()
            .admin_comment("moved")
            .excluded_nodes(["node3"]);
        t.client
            .update_job(id, &update)
            .await
            .unwrap_or_else(|e| panic!("{label}: update: {e}"));
        let updated = t.client.get_job(id).await.unwrap().value;
        assert_eq!(updated.admin_comment.as_deref(), Some("moved"), "{label}");
        assert_eq!(updated.excluded_nodes.as_deref(), Some("node3"), "{label}");
        let cleared = JobUpdate::default().excluded_nodes(Vec::<String>::new());
        t.client
            .update_job(id, &cleared)
            .await
            .unwrap_or_else(|e| panic!("{label}: clear: {e}"));
        let updated = t.client.get_job(id).await.unwrap().value;
        assert_eq!(updated.excluded_nodes, None, "{label}");
        t.client.cancel_job(id).await.unwrap();

        let id = t
            .client
            .submit_job(&t.quick_job("priority", 30).priority(1234))
            .await
            .unwrap_or_else(|e| panic!("{label}: submit with priority: {e:?}"))
            .value
            .job_id;
        let job = t.client.get_job(id).await.unwrap().value;
        assert_eq!(job.priority, Limit::Value(1234), "{label}: {job:?}");
        t.client.cancel_job(id).await.unwrap();
    }
}

/// The states of several jobs in one request; unknown ids are left out, an empty list is refused.
#[tokio::test]
async fn job_states_of_several_jobs() {
    for t in targets().await {
        let label = t.label();
        let mut ids = Vec::new();
        for name in ["states1", "states2"] {
            let job = t.quick_job(name, 1).hold(true);
            ids.push(t.client.submit_job(&job).await.unwrap().value.job_id);
        }
        t.client.cancel_job(ids[1]).await.unwrap();
        wait_for_state(&t, ids[1], &[JobState::Cancelled]).await;
        let states = t
            .client
            .job_states(&[ids[0], ids[1], u32::MAX - 7])
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"))
            .value;
        let got: Vec<_> = states.iter().map(|s| (s.id, s.state.clone())).collect();
        assert_eq!(
            got,
            [(ids[0], JobState::Pending), (ids[1], JobState::Cancelled)],
            "{label}: {states:?}"
        );
        assert!(states.iter().all(|s| s.component.is_none()), "{label}");
        assert!(
            matches!(t.client.job_states(&[]).await, Err(Error::Config(_))),
            "{label}"
        );
        t.client.cancel_job(ids[0]).await.unwrap();
    }
}
