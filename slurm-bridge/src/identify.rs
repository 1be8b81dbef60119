//! Which Slurm job stands for a workload, and what is known of it. Pure: the scheduler gathers
//! the pods, the job book's entries and the Kubernetes nodes, and applies the answer.
//!
//! The id comes from, in this order: the `slurm-jobid` label of a live pod; a pending or
//! running job whose admin_comment names a live pod (a bridge stopped before it labelled its
//! pods); the label of an ended pod, whose job may still need cancelling. A job found only
//! through ended pods that Slurm no longer has, or that ended, is no job for the live pods.

use slurm_client::model::Job;

use crate::decide::{JobView, PodView};
use crate::jobs::{self, Seen};

/// Where the workload's job id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSource {
    pub id: u32,
    /// Found only on pods that are gone.
    pub from_gone: bool,
}

/// The workload's job id. `comment_job(i)` is the active job whose admin_comment names pod
/// `i` of `views`, if any.
pub fn job_source(
    views: &[PodView],
    comment_job: impl Fn(usize) -> Option<u32>,
) -> Option<JobSource> {
    let live_label = views
        .iter()
        .filter(|v| !v.gone())
        .filter_map(|v| v.job_id)
        .max();
    let comment = || {
        views
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.gone())
            .filter_map(|(i, _)| comment_job(i))
            .max()
    };
    if let Some(id) = live_label.or_else(comment) {
        return Some(JobSource {
            id,
            from_gone: false,
        });
    }
    let gone_label = views
        .iter()
        .filter(|v| v.gone())
        .filter_map(|v| v.job_id)
        .max()?;
    Some(JobSource {
        id: gone_label,
        from_gone: true,
    })
}

/// What the decisions know of the job `source` names, from the book's reading of it (`None`:
/// not in the book yet, so not read: unknown). `k8s_node(slurm)` is the Kubernetes node a
/// Slurm node name stands for.
pub fn job_view(
    source: JobSource,
    seen: Option<&Seen>,
    k8s_node: impl Fn(&str) -> Option<String>,
) -> JobView {
    match seen {
        None | Some(Seen::Unread) => JobView::Unknown,
        Some(Seen::Missing) if source.from_gone => JobView::None,
        Some(Seen::Missing) => JobView::Missing(source.id),
        Some(Seen::Job(job)) if source.from_gone && job.state.is_finished() => JobView::None,
        Some(Seen::Job(job)) => known(source.id, job, k8s_node),
    }
}

fn known(id: u32, job: &Job, k8s_node: impl Fn(&str) -> Option<String>) -> JobView {
    JobView::Known {
        id,
        reason: job.reason.clone().filter(|r| !r.is_empty() && r != "None"),
        nodes: jobs::job_nodes(job)
            .into_iter()
            .map(|s| {
                let k8s = k8s_node(&s);
                (s, k8s)
            })
            .collect(),
        state: job.state.clone(),
    }
}

#[cfg(test)]
mod tests {
    use slurm_client::JobState;

    use super::*;
    use crate::decide::Phase;

    fn pod(name: &str, job_id: Option<u32>, ended: bool) -> PodView {
        PodView {
            name: name.into(),
            job_id,
            assigned_node: None,
            bound_node: None,
            phase: if ended { Phase::Ended } else { Phase::Pending },
            deleting: None,
            finalizer: false,
            condition: None,
            condition_age: None,
            volumes: crate::decide::Gate::Ready,
            unfit_on: Default::default(),
        }
    }

    #[test]
    fn the_job_id_comes_from_live_labels_then_comments_then_ended_pods() {
        struct Case {
            why: &'static str,
            pods: Vec<PodView>,
            comments: Vec<Option<u32>>,
            want: Option<JobSource>,
        }
        let live = |id| JobSource {
            id,
            from_gone: false,
        };
        let cases = [
            Case {
                why: "no label, no comment: no job",
                pods: vec![pod("a", None, false)],
                comments: vec![None],
                want: None,
            },
            Case {
                why: "a live pod's label, the highest of several",
                pods: vec![pod("a", Some(7), false), pod("b", Some(9), false)],
                comments: vec![Some(100), None],
                want: Some(live(9)),
            },
            Case {
                why: "no label: the job whose comment names a live pod",
                pods: vec![pod("a", None, false)],
                comments: vec![Some(12)],
                want: Some(live(12)),
            },
            Case {
                why: "a comment naming an ended pod does not count",
                pods: vec![pod("a", None, true)],
                comments: vec![Some(12)],
                want: None,
            },
            Case {
                why: "only an ended pod's label: that job, marked as such",
                pods: vec![pod("a", Some(5), true), pod("b", None, false)],
                comments: vec![None, None],
                want: Some(JobSource {
                    id: 5,
                    from_gone: true,
                }),
            },
            Case {
                why: "a live label wins over an ended pod's",
                pods: vec![pod("a", Some(50), true), pod("b", Some(6), false)],
                comments: vec![None, None],
                want: Some(live(6)),
            },
        ];
        for c in cases {
            let got = job_source(&c.pods, |i| c.comments[i]);
            assert_eq!(got, c.want, "{}", c.why);
        }
    }

    fn job(state: JobState, nodes: &str, reason: Option<&str>) -> Seen {
        let mut j = Job::default();
        j.id = 3;
        j.state = state;
        j.nodes = Some(nodes.into());
        j.reason = reason.map(str::to_owned);
        Seen::Job(Box::new(j))
    }

    #[test]
    fn what_is_known_of_the_job() {
        let live = JobSource {
            id: 3,
            from_gone: false,
        };
        let gone = JobSource {
            id: 3,
            from_gone: true,
        };
        let k8s = |s: &str| (s == "n1").then(|| "k8s-n1".to_owned());

        assert_eq!(
            job_view(live, None, k8s),
            JobView::Unknown,
            "not in the book"
        );
        assert_eq!(job_view(live, Some(&Seen::Unread), k8s), JobView::Unknown);
        assert_eq!(
            job_view(live, Some(&Seen::Missing), k8s),
            JobView::Missing(3)
        );
        assert_eq!(
            job_view(gone, Some(&Seen::Missing), k8s),
            JobView::None,
            "an ended pod's job that Slurm forgot is no job"
        );
        assert_eq!(
            job_view(gone, Some(&job(JobState::Completed, "n1", None)), k8s),
            JobView::None,
            "an ended pod's job that ended is no job"
        );
        assert_eq!(
            job_view(
                live,
                Some(&job(JobState::Running, "n[1-2]", Some("None"))),
                k8s
            ),
            JobView::Known {
                id: 3,
                state: JobState::Running,
                reason: None,
                nodes: vec![("n1".into(), Some("k8s-n1".into())), ("n2".into(), None)],
            }
        );
        assert_eq!(
            job_view(
                gone,
                Some(&job(JobState::Pending, "", Some("Priority"))),
                k8s
            ),
            JobView::Known {
                id: 3,
                state: JobState::Pending,
                reason: Some("Priority".into()),
                nodes: vec![],
            },
            "an ended pod's job still pending is known (it needs cancelling)"
        );
    }
}
