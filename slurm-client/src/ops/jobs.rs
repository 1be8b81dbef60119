//! Jobs in slurmctld: list, get, submit, update, signal/cancel, hold/release, requeue.

use crate::model::{Job, JobList, JobQuery, JobSubmission, JobUpdate, StreamedJobs, SubmittedJob};
use crate::{ApiVersion, Client, Error, Request, Response, SlurmError, path_segment};

impl Client {
    /// Lists jobs (`GET /slurm/vX/jobs/`), filtered by `query`.
    ///
    /// With [`JobQuery::update_time`] set, slurmctld answers with every job if anything
    /// changed since then, and with none ([`JobList::unchanged`]) otherwise — the cheap way
    /// to poll; see also [`JobTracker`](crate::JobTracker).
    ///
    /// A large answer (slurmrestd sends about 8 KiB per job) is decoded on up to one thread
    /// per core (at most 8): the task's own and short-lived scoped threads, which are gone
    /// when this returns. For a listing that is only aggregated, [`Client::for_each_job`]
    /// holds one job at a time instead of all of them.
    pub async fn list_jobs(&self, query: &JobQuery) -> Result<Response<JobList>, Error> {
        let request = listing_request(self, query).await?;
        let response = dispatch!(self, "job listing", list(self, request))?;
        Ok(finish_listing(query, response))
    }

    /// Lists jobs as [`Client::list_jobs`] does, but hands each job (kept by `query`'s
    /// filters) to `each` as soon as its part of the answer has arrived, without ever
    /// holding the whole answer or list: for large clusters (20,000 jobs are ~155 MiB of
    /// JSON) where the caller only aggregates.
    ///
    /// slurmrestd sends `errors[]` after the jobs, so the listing is only known to be
    /// complete and good when this returns `Ok`: after an `Err` (an error answer, even
    /// with a 2xx status, a body cut off, a job that does not match the spec, a timeout),
    /// the jobs already handed out are an incomplete listing and must be dropped. Transient
    /// failures are retried only while no job was handed out yet. The returned
    /// [`StreamedJobs`] carries what [`JobList`] says besides its jobs, `warnings[]` and
    /// `meta` come in the [`Response`].
    ///
    /// The request time limit covers the whole answer, so here it also covers the decoding
    /// and whatever `each` does: give large listings a generous one.
    pub async fn for_each_job(
        &self,
        query: &JobQuery,
        mut each: impl FnMut(Job) + Send,
    ) -> Result<Response<StreamedJobs>, Error> {
        let request = listing_request(self, query).await?;
        let (mut listed, mut jobs) = (0, 0);
        let mut keep = |job: Job| {
            listed += 1;
            if query.matches(&job) {
                jobs += 1;
                each(job);
            }
        };
        let response = dispatch!(self, "job listing", stream(self, request, &mut keep))?;
        Ok(response.map(|list| StreamedJobs {
            jobs,
            listed,
            last_update: list.last_update,
            last_backfill: list.last_backfill,
            unchanged: query.update_time.is_some() && listed == 0 && list.last_update.is_none(),
        }))
    }

    /// One job (`GET /slurm/vX/job/{id}`); [`Error::NotFound`] if slurmctld does not know it
    /// (any more). For a job array's id this is the record with exactly that id.
    pub async fn get_job(&self, id: u32) -> Result<Response<Job>, Error> {
        let path = job_path(self, id).await?;
        let response = dispatch!(self, "job query", list(self, Request::get(path.clone())))?;
        super::single(response, path, |list| list.jobs, |j| j.id == id)
    }

    /// Every record `GET /slurm/vX/job/{id}` returns: one job, or every task of a job array
    /// or component of a heterogeneous job.
    pub async fn get_job_records(&self, id: u32) -> Result<Response<Vec<Job>>, Error> {
        let request = Request::get(job_path(self, id).await?);
        let response = dispatch!(self, "job query", list(self, request))?;
        Ok(response.map(|list| list.jobs))
    }

    /// Submits a batch job (`POST /slurm/vX/job/submit`). Never retried: a submission that
    /// timed out may still have been accepted.
    ///
    /// Slurm's refusals (invalid partition, account, …) come back as
    /// [`Error::Rejected`] with every entry of `errors[]`. An external job
    /// ([`JobSubmission::external`]) needs REST v0.0.43+ (Slurm 25.05+): older versions give
    /// [`Error::Unsupported`] for `"external job submission"` and nothing is sent.
    pub async fn submit_job(&self, job: &JobSubmission) -> Result<Response<SubmittedJob>, Error> {
        job.validate()
            .map_err(|e| Error::Config(format!("invalid job submission: {e}")))?;
        let version = self.version().await?;
        let path = format!("/slurm/{version}/job/submit");
        dispatch!(self, "job submission", submit(self, path, job))
    }

    /// Changes a job (`POST /slurm/vX/job/{id}`): time limit, comment, priority, hold, …
    pub async fn update_job(&self, id: u32, update: &JobUpdate) -> Result<Response<()>, Error> {
        if update.is_empty() {
            return Err(Error::Config(format!(
                "job update for {id} changes nothing"
            )));
        }
        let path = job_path(self, id).await?;
        dispatch!(self, "job update", update(self, path, update))
    }

    /// Holds a pending job (priority 0, `scontrol hold`).
    pub async fn hold_job(&self, id: u32) -> Result<Response<()>, Error> {
        self.update_job(id, &JobUpdate::default().hold(true)).await
    }

    /// Releases a held job (`scontrol release`).
    pub async fn release_job(&self, id: u32) -> Result<Response<()>, Error> {
        self.update_job(id, &JobUpdate::default().hold(false)).await
    }

    /// Cancels a job (`scancel`: sends SIGKILL). [`Error::NotFound`] for an unknown job.
    pub async fn cancel_job(&self, id: u32) -> Result<Response<()>, Error> {
        self.signal_job(id, "KILL").await
    }

    /// Sends `signal` (a name such as `"TERM"`, `"USR1"`, or a number) to a job
    /// (`DELETE /slurm/vX/job/{id}?signal=…`).
    pub async fn signal_job(&self, id: u32, signal: &str) -> Result<Response<()>, Error> {
        if signal.is_empty() || !signal.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(Error::Config(format!(
                "invalid signal {signal:?}: expected a name like TERM or a number"
            )));
        }
        let path = job_path(self, id).await?;
        let request = Request::delete(path.clone()).query("signal", signal);
        dispatch!(self, "job signal", kill(self, request, path))
    }

    /// Requeues a job (`scontrol requeue`). Only REST v0.0.45 (Slurm 26.05) has it; older
    /// versions give [`Error::Unsupported`].
    pub async fn requeue_job(&self, id: u32) -> Result<Response<()>, Error> {
        let path = format!("{}/requeue", job_path(self, id).await?);
        dispatch!(self, "job requeue", requeue(self, path))
    }
}

/// The `GET /slurm/vX/jobs/` request for `query`.
async fn listing_request(client: &Client, query: &JobQuery) -> Result<Request, Error> {
    let version = client.version().await?;
    let mut request = Request::get(format!("/slurm/{version}/jobs/"));
    if let Some(time) = query.update_time {
        request = request.query("update_time", update_time_param(version, time));
    }
    if query.all {
        request = request.query("flags", "ALL");
    }
    Ok(request)
}

/// The part of [`Client::list_jobs`] after the version's conversion.
fn finish_listing(query: &JobQuery, mut response: Response<JobList>) -> Response<JobList> {
    let list = &mut response.value;
    list.unchanged =
        query.update_time.is_some() && list.jobs.is_empty() && list.last_update.is_none();
    list.jobs.retain(|job| query.matches(job));
    response
}

/// What [`Client::list_jobs`] does with a 2xx answer of `version`, without the HTTP
/// request: the same decoding and conversion (for `benches/decode.rs`).
pub(crate) fn listing_from_body(
    version: ApiVersion,
    query: &JobQuery,
    body: Vec<u8>,
) -> Result<Response<JobList>, Error> {
    let path = format!("/slurm/{version}/jobs/");
    #[allow(unreachable_patterns)]
    let response = match version {
        #[cfg(feature = "v0_0_40")]
        ApiVersion::V0_0_40 => v0_0_40::list_from_body(&path, body),
        #[cfg(feature = "v0_0_41")]
        ApiVersion::V0_0_41 => v0_0_41::list_from_body(&path, body),
        #[cfg(feature = "v0_0_42")]
        ApiVersion::V0_0_42 => v0_0_42::list_from_body(&path, body),
        #[cfg(feature = "v0_0_43")]
        ApiVersion::V0_0_43 => v0_0_43::list_from_body(&path, body),
        #[cfg(feature = "v0_0_44")]
        ApiVersion::V0_0_44 => v0_0_44::list_from_body(&path, body),
        #[cfg(feature = "v0_0_45")]
        ApiVersion::V0_0_45 => v0_0_45::list_from_body(&path, body),
        other => Err(Error::unsupported("job listing", other, None)),
    }?;
    Ok(finish_listing(query, response))
}

async fn job_path(client: &Client, id: u32) -> Result<String, Error> {
    let version = client.version().await?;
    Ok(format!(
        "/slurm/{version}/job/{}",
        path_segment(&id.to_string())
    ))
}

/// The `update_time` query value. v0.0.40 and v0.0.41 reject plain epoch numbers (Slurm
/// 24.11 answers "Parsing of … for timestamp failed"), so they get Slurm's relative form
/// `now-<n>seconds`, computed from this machine's clock (one second earlier, to be safe).
pub(crate) fn update_time_param(version: ApiVersion, time: i64) -> String {
    if version >= ApiVersion::V0_0_42 {
        return time.to_string();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    format!("now-{}seconds", (now - time).max(0) + 1)
}

/// The job-kill answer's per-job `status[]` entries that carry an error (v0.0.42+), as an
/// [`Error`]: `NotFound` for an unknown job, `Rejected` otherwise.
fn kill_error(path: String, status: u16, errors: Vec<SlurmError>) -> Result<(), Error> {
    if errors.is_empty() {
        return Ok(());
    }
    let method = crate::Method::DELETE;
    if errors.iter().any(|e| e.error_number == Some(2017)) {
        Err(Error::NotFound {
            method,
            path,
            status,
            errors,
        })
    } else {
        Err(Error::Rejected {
            method,
            path,
            status,
            errors,
        })
    }
}

/// The part every version shares; expects the aliases `JobsResp`, `JobItem`, `SubmitReq`,
/// `SubmitResp`, `UpdateReq`, `UpdateResp`, `KillResp`, a `kill_status(KillResp) ->
/// Vec<SlurmError>` function and the constant `EXTERNAL_JOB` (whether the version has the
/// job flag `EXTERNAL_JOB`) in scope.
macro_rules! jobs_version {
    () => {
        use crate::model::{
            ArrayInfo, ExitCode, Job, JobFlag, JobList, JobState, JobSubmission, JobUpdate, Limit,
            SubmittedJob, Tres, epoch, split_states, text,
        };
        use crate::ops::{id32, strings, wire};
        use crate::{Client, Error, Request, Response};

        pub(super) async fn list(
            client: &Client,
            request: Request,
        ) -> Result<Response<JobList>, Error> {
            let (reply, jobs) =
                crate::transport::execute_with(client.inner(), &request, read_jobs).await?;
            Ok(Response::from(reply).map(|r| job_list(r, jobs)))
        }

        /// A listing answer, its jobs decoded on several threads when it is large.
        fn read_jobs(
            method: &crate::Method,
            path: &str,
            status: u16,
            body: Vec<u8>,
        ) -> Result<(crate::transport::Reply<JobsResp>, Vec<Job>), Error> {
            crate::parallel::read_listing(
                method,
                path,
                status,
                body,
                "jobs",
                |r: &mut JobsResp| r.jobs.take().map(Vec::<JobItem>::from).unwrap_or_default(),
                job,
            )
        }

        pub(super) async fn stream(
            client: &Client,
            request: Request,
            each: &mut (dyn FnMut(Job) + Send),
        ) -> Result<Response<JobList>, Error> {
            let reply = crate::stream::stream_list::<JobItem, JobsResp>(
                client.inner(),
                &request,
                "jobs",
                &mut |item| each(job(item)),
            )
            .await?;
            Ok(Response::from(reply).map(|r| job_list(r, Vec::new())))
        }

        pub(super) fn list_from_body(
            path: &str,
            body: Vec<u8>,
        ) -> Result<Response<JobList>, Error> {
            let (reply, jobs) = read_jobs(&crate::Method::GET, path, 200, body)?;
            Ok(Response::from(reply).map(|r| job_list(r, jobs)))
        }

        /// The listing `r` with `jobs`, its jobs already converted.
        fn job_list(r: JobsResp, jobs: Vec<Job>) -> JobList {
            JobList {
                jobs,
                last_update: epoch(noval!(r.last_update).value()),
                last_backfill: epoch(noval!(r.last_backfill).value()),
                unchanged: false,
            }
        }

        fn job(j: JobItem) -> Job {
            let (state, state_flags) = split_states(
                strings(j.job_state),
                JobState::parse,
                JobFlag::parse,
                JobState::default(),
            );
            let array_job_id = noval!(j.array_job_id)
                .narrow::<u32>()
                .value()
                .filter(|id| *id > 0);
            let array = array_job_id.map(|job_id| ArrayInfo {
                job_id,
                task_id: noval!(j.array_task_id).narrow::<u32>().value(),
                task_string: text(j.array_task_string),
                max_tasks: noval!(j.array_max_tasks).narrow::<u32>().value(),
            });
            let exit_code = j.exit_code.map(|e| ExitCode {
                status: strings(e.status),
                return_code: noval!(e.return_code).value(),
                signal: e.signal.as_ref().and_then(|s| noval!(s.id.clone()).value()),
                signal_name: e.signal.and_then(|s| text(s.name)),
            });
            Job {
                id: id32(j.job_id).unwrap_or_default(),
                name: j.name.unwrap_or_default(),
                user: j.user_name.unwrap_or_default(),
                user_id: id32(j.user_id),
                group_id: id32(j.group_id),
                account: text(j.account),
                partition: text(j.partition),
                qos: text(j.qos),
                reservation: text(j.resv_name),
                state,
                state_flags,
                reason: text(j.state_reason).filter(|r| r != "None"),
                state_description: text(j.state_description),
                nodes: text(j.nodes),
                node_count: noval!(j.node_count).narrow(),
                cpus: noval!(j.cpus).narrow(),
                tasks: noval!(j.tasks).narrow(),
                cpus_per_task: noval!(j.cpus_per_task).narrow(),
                memory_per_node_mb: noval!(j.memory_per_node).narrow(),
                memory_per_cpu_mb: noval!(j.memory_per_cpu).narrow(),
                tres_requested: Tres::parse(j.tres_req_str.as_deref().unwrap_or_default()),
                tres_allocated: Tres::parse(j.tres_alloc_str.as_deref().unwrap_or_default()),
                tres_per_node: text(j.tres_per_node),
                submit_time: epoch(noval!(j.submit_time).value()),
                eligible_time: epoch(noval!(j.eligible_time).value()),
                start_time: epoch(noval!(j.start_time).value()),
                end_time: epoch(noval!(j.end_time).value()),
                last_sched_evaluation: epoch(noval!(j.last_sched_evaluation).value()),
                time_limit_minutes: noval!(j.time_limit).narrow(),
                priority: noval!(j.priority).narrow(),
                nice: j.nice,
                held: j.hold.unwrap_or_default(),
                exit_code,
                array,
                batch_host: text(j.batch_host),
                batch: j.batch_flag.unwrap_or_default(),
                comment: text(j.comment),
                working_directory: text(j.current_working_directory),
                stdout: text(j.standard_output),
                stderr: text(j.standard_error),
                command: text(j.command),
                dependency: text(j.dependency),
                features: text(j.features),
                licenses: text(j.licenses),
                restart_count: id32(j.restart_cnt).unwrap_or_default(),
                requeue: j.requeue.unwrap_or_default(),
                cluster: text(j.cluster),
                admin_comment: text(j.admin_comment),
                mcs_label: text(j.mcs_label),
                flags: strings(j.flags),
                excluded_nodes: text(j.excluded_nodes),
            }
        }

        pub(super) async fn submit(
            client: &Client,
            path: String,
            submission: &JobSubmission,
        ) -> Result<Response<SubmittedJob>, Error> {
            let body = match submit_body(submission) {
                Ok(body) => body,
                Err(operation) => return Err(client.unsupported(operation).await),
            };
            let request = Request::post(path).json(&body);
            let response = client.request::<SubmitResp>(request).await?;
            Ok(response.map(|r| SubmittedJob {
                job_id: id32(r.job_id).unwrap_or_default(),
                step_id: text(r.step_id),
                user_message: text(r.job_submit_user_msg),
            }))
        }

        /// The submission body, or `Err(operation)` naming what this version lacks.
        pub(super) fn submit_body(submission: &JobSubmission) -> Result<SubmitReq, &'static str> {
            if submission.external && !EXTERNAL_JOB {
                return Err("external job submission");
            }
            let mut body = SubmitReq::default();
            let job = body.job.get_or_insert_with(Default::default);
            let s = submission.clone();
            let minimum_nodes = s.minimum_nodes();
            job.script = (!(s.external && s.script.is_empty())).then_some(s.script);
            if s.external {
                job.flags = Some(vec!["EXTERNAL_JOB".to_string()].into());
            }
            job.name = s.name;
            job.partition = s.partition;
            job.account = s.account;
            job.qos = s.qos;
            job.reservation = s.reservation;
            job.tasks = s.tasks.map(i64::from);
            job.cpus_per_task = s.cpus_per_task.map(i64::from);
            job.minimum_nodes = minimum_nodes.map(i64::from);
            job.maximum_nodes = s.max_nodes.map(i64::from);
            job.tasks_per_node = s.tasks_per_node.map(i64::from);
            if let Some(mb) = s.memory_per_node_mb {
                job.memory_per_node = wire(Limit::Value(mb));
            }
            if let Some(mb) = s.memory_per_cpu_mb {
                job.memory_per_cpu = wire(Limit::Value(mb));
            }
            if let Some(minutes) = s.time_limit_minutes {
                job.time_limit = wire(Limit::Value(minutes));
            }
            if let Some(priority) = s.priority {
                job.priority = wire(Limit::Value(priority));
            }
            job.tres_per_node = s.tres_per_node;
            job.constraints = s.constraints;
            job.current_working_directory = s.working_directory;
            let environment = if s.environment.is_empty() {
                vec!["PATH=/bin:/usr/bin:/usr/local/bin".to_string()]
            } else {
                s.environment
            };
            job.environment = Some(environment.into());
            job.standard_output = s.stdout;
            job.standard_error = s.stderr;
            job.comment = s.comment;
            job.admin_comment = s.admin_comment;
            job.mcs_label = s.mcs_label;
            if !s.excluded_nodes.is_empty() {
                job.excluded_nodes = Some(s.excluded_nodes.into());
            }
            if s.exclusive {
                job.shared = Some(vec!["none".to_string()].into());
            }
            job.user_id = s.user_id.map(|uid| uid.to_string());
            job.group_id = s.group_id.map(|gid| gid.to_string());
            job.licenses = s.licenses;
            job.wckey = s.wckey;
            job.dependency = s.dependency;
            job.array = s.array;
            job.hold = s.hold.then_some(true);
            job.nice = s.nice;
            Ok(body)
        }

        pub(super) async fn update(
            client: &Client,
            path: String,
            update: &JobUpdate,
        ) -> Result<Response<()>, Error> {
            let request = Request::post(path).json(&update_body(update));
            Ok(client.request::<UpdateResp>(request).await?.map(|_| ()))
        }

        /// The update body.
        pub(super) fn update_body(update: &JobUpdate) -> UpdateReq {
            let mut body = UpdateReq::default();
            let u = update.clone();
            if let Some(limit) = u.time_limit_minutes {
                body.time_limit = wire(limit);
            }
            if let Some(priority) = u.priority {
                body.priority = wire(priority);
            }
            body.comment = u.comment;
            body.hold = u.hold;
            body.name = u.name;
            body.partition = u.partition;
            body.qos = u.qos;
            body.account = u.account;
            body.nice = u.nice;
            body.admin_comment = u.admin_comment;
            // slurmrestd reads an empty list as "leave it": a single empty name clears it.
            body.excluded_nodes = u.excluded_nodes.map(|nodes| {
                if nodes.is_empty() {
                    vec![String::new()].into()
                } else {
                    nodes.into()
                }
            });
            body
        }

        pub(super) async fn kill(
            client: &Client,
            request: Request,
            path: String,
        ) -> Result<Response<()>, Error> {
            let response = client.request::<KillResp>(request).await?;
            let status = response.status;
            let mut failures = Vec::new();
            let response = response.map(|r| failures = kill_status(r));
            super::kill_error(path, status, failures)?;
            Ok(response)
        }
    };
}

/// v0.0.42+ report per-job kill failures in `status[]` (with HTTP 200).
#[allow(unused_macros)] // not every version needs it
macro_rules! kill_status_list {
    () => {
        fn kill_status(r: KillResp) -> Vec<crate::SlurmError> {
            r.status
                .map(Vec::from)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|s| s.error)
                .filter(|e| e.code.is_some_and(|c| c != 0))
                .map(|e| crate::SlurmError {
                    error_number: e.code,
                    error: e.string,
                    description: e.message,
                    source: Some("status[]".into()),
                })
                .collect()
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type JobsResp = t::V0040OpenapiJobInfoResp;
    type JobItem = t::V0040JobInfo;
    type SubmitReq = t::V0040JobSubmitReq;
    type SubmitResp = t::V0040OpenapiJobSubmitResponse;
    type UpdateReq = t::V0040JobDescMsg;
    type UpdateResp = t::V0040OpenapiJobPostResponse;
    type KillResp = t::V0040OpenapiResp;
    /// The job flag `EXTERNAL_JOB` came with v0.0.43 (Slurm 25.05).
    const EXTERNAL_JOB: bool = false;
    /// v0.0.40 reports kill failures in `errors[]` only.
    fn kill_status(_: KillResp) -> Vec<crate::SlurmError> {
        Vec::new()
    }
    jobs_version!();
    unsupported! { requeue(path: String) -> Response<()> = "job requeue"; }
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type JobsResp = t::V0041OpenapiJobInfoResp;
    type JobItem = t::V0041OpenapiJobInfoRespJobsItem;
    type SubmitReq = t::SlurmV0041PostJobSubmitBody;
    type SubmitResp = t::SlurmV0041PostJobSubmitResponse;
    type UpdateReq = t::SlurmV0041PostJobBody;
    type UpdateResp = t::SlurmV0041PostJobResponse;
    type KillResp = t::V0041OpenapiResp;
    /// The job flag `EXTERNAL_JOB` came with v0.0.43 (Slurm 25.05).
    const EXTERNAL_JOB: bool = false;
    /// v0.0.41 reports kill failures in `errors[]` only.
    fn kill_status(_: KillResp) -> Vec<crate::SlurmError> {
        Vec::new()
    }
    jobs_version!();
    unsupported! { requeue(path: String) -> Response<()> = "job requeue"; }
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type JobsResp = t::V0042OpenapiJobInfoResp;
    type JobItem = t::V0042JobInfo;
    type SubmitReq = t::V0042JobSubmitReq;
    type SubmitResp = t::V0042OpenapiJobSubmitResponse;
    type UpdateReq = t::V0042JobDescMsg;
    type UpdateResp = t::V0042OpenapiJobPostResponse;
    type KillResp = t::V0042OpenapiKillJobResp;
    /// The job flag `EXTERNAL_JOB` came with v0.0.43 (Slurm 25.05).
    const EXTERNAL_JOB: bool = false;
    kill_status_list!();
    jobs_version!();
    unsupported! { requeue(path: String) -> Response<()> = "job requeue"; }
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type JobsResp = t::V0043OpenapiJobInfoResp;
    type JobItem = t::V0043JobInfo;
    type SubmitReq = t::V0043JobSubmitReq;
    type SubmitResp = t::V0043OpenapiJobSubmitResponse;
    type UpdateReq = t::V0043JobDescMsg;
    type UpdateResp = t::V0043OpenapiJobPostResponse;
    type KillResp = t::V0043OpenapiKillJobResp;
    const EXTERNAL_JOB: bool = true;
    kill_status_list!();
    jobs_version!();
    unsupported! { requeue(path: String) -> Response<()> = "job requeue"; }
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type JobsResp = t::V0044OpenapiJobInfoResp;
    type JobItem = t::V0044JobInfo;
    type SubmitReq = t::V0044JobSubmitReq;
    type SubmitResp = t::V0044OpenapiJobSubmitResponse;
    type UpdateReq = t::V0044JobDescMsg;
    type UpdateResp = t::V0044OpenapiJobPostResponse;
    type KillResp = t::V0044OpenapiKillJobResp;
    const EXTERNAL_JOB: bool = true;
    kill_status_list!();
    jobs_version!();
    unsupported! { requeue(path: String) -> Response<()> = "job requeue"; }
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type JobsResp = t::V0045OpenapiJobInfoResp;
    type JobItem = t::V0045JobInfo;
    type SubmitReq = t::V0045JobSubmitReq;
    type SubmitResp = t::V0045OpenapiJobSubmitResponse;
    type UpdateReq = t::V0045JobDescMsg;
    type UpdateResp = t::V0045OpenapiJobPostResponse;
    type KillResp = t::V0045OpenapiKillJobResp;
    const EXTERNAL_JOB: bool = true;
    type RequeueResp = t::V0045OpenapiJobRequeueResp;
    kill_status_list!();
    jobs_version!();

    /// Only v0.0.45 has `GET /job/{id}/requeue`.
    pub(super) async fn requeue(client: &Client, path: String) -> Result<Response<()>, Error> {
        let request = Request::get(path).idempotent(false);
        Ok(client.request::<RequeueResp>(request).await?.map(|_| ()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::model::{JobSubmission, JobUpdate};

    /// `(version, submission body or the unsupported operation)` for every compiled version.
    #[allow(clippy::vec_init_then_push)] // one push per compiled version
    fn submit_bodies(s: &JobSubmission) -> Vec<(&'static str, Result<Value, &'static str>)> {
        fn json<T: serde::Serialize>(body: Result<T, &'static str>) -> Result<Value, &'static str> {
            body.map(|b| serde_json::to_value(b).expect("serializes"))
        }
        #[allow(unused_mut)]
        let mut out = Vec::new();
        #[cfg(feature = "v0_0_40")]
        out.push(("v0.0.40", json(super::v0_0_40::submit_body(s))));
        #[cfg(feature = "v0_0_41")]
        out.push(("v0.0.41", json(super::v0_0_41::submit_body(s))));
        #[cfg(feature = "v0_0_42")]
        out.push(("v0.0.42", json(super::v0_0_42::submit_body(s))));
        #[cfg(feature = "v0_0_43")]
        out.push(("v0.0.43", json(super::v0_0_43::submit_body(s))));
        #[cfg(feature = "v0_0_44")]
        out.push(("v0.0.44", json(super::v0_0_44::submit_body(s))));
        #[cfg(feature = "v0_0_45")]
        out.push(("v0.0.45", json(super::v0_0_45::submit_body(s))));
        out
    }

    /// `(version, update body)` for every compiled version.
    #[allow(clippy::vec_init_then_push)] // one push per compiled version
    fn update_bodies(u: &JobUpdate) -> Vec<(&'static str, Value)> {
        fn json<T: serde::Serialize>(body: T) -> Value {
            serde_json::to_value(body).expect("serializes")
        }
        #[allow(unused_mut)]
        let mut out = Vec::new();
        #[cfg(feature = "v0_0_40")]
        out.push(("v0.0.40", json(super::v0_0_40::update_body(u))));
        #[cfg(feature = "v0_0_41")]
        out.push(("v0.0.41", json(super::v0_0_41::update_body(u))));
        #[cfg(feature = "v0_0_42")]
        out.push(("v0.0.42", json(super::v0_0_42::update_body(u))));
        #[cfg(feature = "v0_0_43")]
        out.push(("v0.0.43", json(super::v0_0_43::update_body(u))));
        #[cfg(feature = "v0_0_44")]
        out.push(("v0.0.44", json(super::v0_0_44::update_body(u))));
        #[cfg(feature = "v0_0_45")]
        out.push(("v0.0.45", json(super::v0_0_45::update_body(u))));
        out
    }

    fn has_external_flag(version: &str) -> bool {
        version >= "v0.0.43"
    }

    #[test]
    fn submission_body_carries_the_new_fields() {
        let s = JobSubmission::wrap("true")
            .admin_comment(r#"{"pods":["ns/a"]}"#)
            .mcs_label("kubernetes")
            .exclude_node("node3")
            .exclude_node("node[5-6]")
            .exclusive(true)
            .min_nodes(2)
            .max_nodes(3)
            .tasks_per_node(4)
            .user_id(1000)
            .group_id(100)
            .licenses("matlab:1")
            .wckey("k8s")
            .priority(500);
        for (version, body) in submit_bodies(&s) {
            let job = &body.unwrap()["job"];
            let expect = [
                ("admin_comment", json!(r#"{"pods":["ns/a"]}"#)),
                ("mcs_label", json!("kubernetes")),
                ("excluded_nodes", json!(["node3", "node[5-6]"])),
                ("shared", json!(["none"])),
                ("minimum_nodes", json!(2)),
                ("maximum_nodes", json!(3)),
                ("tasks_per_node", json!(4)),
                ("user_id", json!("1000")),
                ("group_id", json!("100")),
                ("licenses", json!("matlab:1")),
                ("wckey", json!("k8s")),
                ("script", json!("#!/bin/sh\ntrue\n")),
            ];
            for (field, value) in expect {
                assert_eq!(job[field], value, "{version}: {field} in {job}");
            }
            assert_eq!(job["priority"]["number"], json!(500), "{version}: {job}");
            assert_eq!(job["priority"]["set"], json!(true), "{version}: {job}");
            assert!(job.get("flags").is_none(), "{version}: {job}");
        }
    }

    #[test]
    fn unset_fields_are_not_sent() {
        let s = JobSubmission::wrap("true").nodes(2);
        for (version, body) in submit_bodies(&s) {
            let job = &body.unwrap()["job"];
            assert_eq!(job["minimum_nodes"], json!(2), "{version}: {job}");
            for field in [
                "admin_comment",
                "mcs_label",
                "excluded_nodes",
                "shared",
                "maximum_nodes",
                "tasks_per_node",
                "user_id",
                "group_id",
                "licenses",
                "wckey",
                "priority",
                "flags",
            ] {
                assert!(job.get(field).is_none(), "{version}: {field} in {job}");
            }
        }
    }

    #[test]
    fn external_jobs_need_v0_0_43() {
        let s = JobSubmission::external_job()
            .partition("debug")
            .min_nodes(1)
            .working_directory("/tmp");
        assert!(s.validate().is_ok());
        for (version, body) in submit_bodies(&s) {
            if has_external_flag(version) {
                let job = &body.unwrap()["job"];
                assert_eq!(job["flags"], json!(["EXTERNAL_JOB"]), "{version}: {job}");
                assert!(job.get("script").is_none(), "{version}: {job}");
                assert_eq!(job["minimum_nodes"], json!(1), "{version}: {job}");
            } else {
                assert_eq!(body, Err("external job submission"), "{version}");
            }
        }
        // An external job with a script sends it.
        let s = JobSubmission::wrap("true").external(true);
        for (version, body) in submit_bodies(&s) {
            if let Ok(body) = body {
                assert_eq!(
                    body["job"]["script"],
                    json!("#!/bin/sh\ntrue\n"),
                    "{version}"
                );
                assert_eq!(body["job"]["flags"], json!(["EXTERNAL_JOB"]), "{version}");
            }
        }
    }

    #[test]
    fn update_body_carries_admin_comment_and_excluded_nodes() {
        let u = JobUpdate::default()
            .admin_comment("placed")
            .excluded_nodes(["node1", "node2"]);
        for (version, body) in update_bodies(&u) {
            assert_eq!(body["admin_comment"], json!("placed"), "{version}: {body}");
            assert_eq!(
                body["excluded_nodes"],
                json!(["node1", "node2"]),
                "{version}: {body}"
            );
        }
        for (version, body) in update_bodies(&JobUpdate::default().comment("c")) {
            assert!(body.get("admin_comment").is_none(), "{version}: {body}");
            assert!(body.get("excluded_nodes").is_none(), "{version}: {body}");
        }
    }
}
