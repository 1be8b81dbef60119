//! The states of many jobs in one request (`GET /slurm/vX/jobs/state/`).

use crate::model::JobStatus;
use crate::{Client, Error, Request, Response};

impl Client {
    /// The states of the jobs `ids` (`GET /slurm/vX/jobs/state/?job_id=…`), in one request of
    /// about 80 bytes per job: the cheap way to notice that some of many jobs started or ended,
    /// then [`Client::get_job`] only those. Jobs slurmctld does not know (any more) are left
    /// out; an array job's id gives its tasks.
    ///
    /// `ids` must not be empty: without a filter slurmrestd answers with every job.
    pub async fn job_states(&self, ids: &[u32]) -> Result<Response<Vec<JobStatus>>, Error> {
        if ids.is_empty() {
            return Err(Error::Config(
                "job_states needs at least one job id (without one Slurm lists every job)".into(),
            ));
        }
        let version = self.version().await?;
        // Repeated parameters: slurmrestd 26.05 fails a comma-separated list of several ids
        // with "Unspecified error".
        let request = ids
            .iter()
            .fold(
                Request::get(format!("/slurm/{version}/jobs/state/")),
                |r, id| r.query("job_id", id),
            )
            .idempotent(true);
        dispatch!(self, "job states", states(self, request))
    }
}

/// `12` → (12, None); `12_3` → (12, Some("_3")); `12+1` → (12, Some("+1")).
fn split_id(text: &str) -> Option<(u32, Option<String>)> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let id = text[..digits].parse().ok()?;
    let rest = &text[digits..];
    Some((id, (!rest.is_empty()).then(|| rest.to_owned())))
}

/// Shared by every version; expects the alias `StatesResp`.
macro_rules! job_states_version {
    () => {
        use crate::model::{JobFlag, JobState, JobStatus, split_states};
        use crate::ops::strings;
        use crate::{Client, Error, Request, Response};

        pub(super) async fn states(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<JobStatus>>, Error> {
            let response = client.request::<StatesResp>(request).await?;
            Ok(response.map(|r| {
                r.jobs
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|j| {
                        let (id, component) =
                            super::split_id(j.job_id.as_deref().unwrap_or_default())?;
                        let (state, state_flags) = split_states(
                            strings(j.state),
                            JobState::parse,
                            JobFlag::parse,
                            JobState::default(),
                        );
                        Some(JobStatus {
                            id,
                            component,
                            state,
                            state_flags,
                        })
                    })
                    .collect()
            }))
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    type StatesResp = crate::v0_0_40::types::V0040OpenapiJobStateResp;
    job_states_version!();
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    type StatesResp = crate::v0_0_41::types::V0041OpenapiJobStateResp;
    job_states_version!();
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    type StatesResp = crate::v0_0_42::types::V0042OpenapiJobStateResp;
    job_states_version!();
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    type StatesResp = crate::v0_0_43::types::V0043OpenapiJobStateResp;
    job_states_version!();
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    type StatesResp = crate::v0_0_44::types::V0044OpenapiJobStateResp;
    job_states_version!();
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    type StatesResp = crate::v0_0_45::types::V0045OpenapiJobStateResp;
    job_states_version!();
}

#[cfg(test)]
mod tests {
    use super::split_id;

    #[test]
    fn ids_of_plain_jobs_array_tasks_and_components() {
        assert_eq!(split_id("12"), Some((12, None)));
        assert_eq!(split_id("12_3"), Some((12, Some("_3".into()))));
        assert_eq!(split_id("12+1"), Some((12, Some("+1".into()))));
        assert_eq!(split_id(""), None);
        assert_eq!(split_id("x"), None);
    }
}
