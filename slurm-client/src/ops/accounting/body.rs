//! Decoding slurmdbd's answers, written once for every version (see `ops/mod.rs`).
//!
//! Lists are walked by reference (`.iter()` works on the generated list newtypes and on
//! v0.0.41's plain `Vec`s alike), so no item type needs a name; [`at!`] follows a path of
//! optional fields.

/// `at!(x, a, b)` is `x.a?.b?` as an `Option<&_>`.
macro_rules! at {
    ($root:expr $(, $field:ident)+) => {
        Some(&$root) $(.and_then(|x| x.$field.as_ref()))+
    };
}

/// A generated TRES list (`[{type, name, count}]`, optional) as a [`Tres`](crate::Tres).
macro_rules! tres {
    ($list:expr) => {
        $crate::ops::accounting::body::tres_of(
            $list
                .into_iter()
                .flat_map(|l| l.iter())
                .map(|t| (t.type_.clone(), t.name.clone(), t.count)),
        )
    };
}

/// A generated `{set, infinite, number}` behind a path of optional fields, as `Limit<u32>`.
macro_rules! limit32 {
    ($($path:tt)+) => {
        noval!(at!($($path)+)).narrow::<u32>()
    };
}

/// Process exit code (`{status, return_code, signal: {id, name}}`) as an `ExitCode`.
macro_rules! exit_code {
    ($e:expr) => {
        $e.map(|e| $crate::model::ExitCode {
            status: $crate::ops::strings(e.status.clone()),
            return_code: noval!(e.return_code.as_ref()).value(),
            signal: noval!(at!(e, signal, id)).value(),
            signal_name: at!(e, signal, name).cloned().filter(|s| !s.is_empty()),
        })
    };
}

/// Builds a [`Tres`](crate::Tres) from `(type, name, count)` triples.
pub(crate) fn tres_of(
    items: impl Iterator<Item = (Option<String>, Option<String>, Option<i64>)>,
) -> crate::Tres {
    let entries = items
        .filter_map(|(kind, name, count)| {
            let kind = kind.filter(|k| !k.is_empty())?;
            let key = match name.filter(|n| !n.is_empty()) {
                Some(name) => format!("{kind}/{name}"),
                None => kind,
            };
            Some((key, count?.to_string()))
        })
        .collect();
    crate::Tres { entries }
}

/// The per-version functions; expects the response aliases `AccountsResp`, `UsersResp`,
/// `AssocsResp`, `QosResp`, `ClustersResp`, `TresResp`, `WckeyResp`, `JobsResp` and
/// `PlainResp` in scope, and the functions `assoc_id`, `grp_submit_jobs` and
/// `grp_tres_minutes` for the fields whose shape differs between versions.
macro_rules! accounting_version {
    () => {
        use crate::model::{
            Account, Association, AssociationLimits, ClusterRecord, JobRecord, JobState, Qos,
            QosLimits, StepRecord, TresRecord, User, Wckey, epoch, text,
        };
        use crate::ops::{id32, strings};
        use crate::{Client, Error, Request, Response};

        fn owned(s: Option<&String>) -> Option<String> {
            text(s.cloned())
        }

        pub(in crate::ops::accounting) async fn plain(
            client: &Client,
            request: Request,
        ) -> Result<Response<()>, Error> {
            Ok(client.request::<PlainResp>(request).await?.map(|_| ()))
        }

        pub(in crate::ops::accounting) async fn accounts(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<Account>>, Error> {
            let response = client.request::<AccountsResp>(request).await?;
            Ok(response.map(|r| {
                r.accounts
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|a| Account {
                        name: a.name.clone().unwrap_or_default(),
                        description: owned(a.description.as_ref()),
                        organization: owned(a.organization.as_ref()),
                        coordinators: a
                            .coordinators
                            .iter()
                            .flat_map(|l| l.iter())
                            .filter_map(|c| c.name.clone())
                            .collect(),
                        flags: strings(a.flags.clone()),
                    })
                    .collect()
            }))
        }

        pub(in crate::ops::accounting) async fn users(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<User>>, Error> {
            let response = client.request::<UsersResp>(request).await?;
            Ok(response.map(|r| {
                r.users
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|u| {
                        let mut accounts: Vec<String> = u
                            .associations
                            .iter()
                            .flat_map(|l| l.iter())
                            .filter_map(|a| a.account.clone())
                            .collect();
                        accounts.sort();
                        accounts.dedup();
                        User {
                            name: u.name.clone().unwrap_or_default(),
                            administrator_level: strings(u.administrator_level.clone())
                                .into_iter()
                                .next(),
                            default_account: owned(at!(u, default, account)),
                            default_wckey: owned(at!(u, default, wckey)),
                            accounts,
                            coordinator_of: u
                                .coordinators
                                .iter()
                                .flat_map(|l| l.iter())
                                .filter_map(|c| c.name.clone())
                                .collect(),
                            flags: strings(u.flags.clone()),
                        }
                    })
                    .collect()
            }))
        }

        pub(in crate::ops::accounting) async fn associations(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<Association>>, Error> {
            let response = client.request::<AssocsResp>(request).await?;
            Ok(response.map(|r| {
                r.associations
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|a| Association {
                        id: assoc_id(a.id.as_ref()),
                        cluster: a.cluster.clone().unwrap_or_default(),
                        account: a.account.clone().unwrap_or_default(),
                        user: owned(a.user.as_ref()),
                        partition: owned(a.partition.as_ref()),
                        parent_account: owned(a.parent_account.as_ref()),
                        is_default: a.is_default.unwrap_or(false),
                        shares_raw: id32(a.shares_raw),
                        priority: noval!(a.priority.as_ref()).narrow(),
                        qos: strings(a.qos.clone()),
                        default_qos: owned(at!(a, default, qos)),
                        comment: owned(a.comment.as_ref()),
                        flags: strings(a.flags.clone()),
                        limits: AssociationLimits {
                            max_jobs: limit32!(a, max, jobs, per, count),
                            max_submit_jobs: limit32!(a, max, jobs, per, submitted),
                            max_jobs_accrue: limit32!(a, max, jobs, per, accruing),
                            max_wall_minutes_per_job: limit32!(a, max, jobs, per, wall_clock),
                            max_tres_per_job: tres!(at!(a, max, tres, per, job)),
                            max_tres_per_node: tres!(at!(a, max, tres, per, node)),
                            max_tres_minutes_per_job: tres!(at!(a, max, tres, minutes, per, job)),
                            grp_jobs: limit32!(a, max, jobs, active),
                            grp_submit_jobs: limit32!(a, max, jobs, total),
                            grp_jobs_accrue: limit32!(a, max, jobs, accruing),
                            grp_tres: tres!(at!(a, max, tres, total)),
                            grp_tres_minutes: tres!(at!(a, max, tres, group, minutes)),
                            grp_tres_run_minutes: tres!(at!(a, max, tres, group, active)),
                            grp_wall_minutes: limit32!(a, max, per, account, wall_clock),
                        },
                    })
                    .collect()
            }))
        }

        pub(in crate::ops::accounting) async fn qos(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<Qos>>, Error> {
            let response = client.request::<QosResp>(request).await?;
            Ok(response.map(|r| {
                r.qos
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|q| Qos {
                        id: id32(q.id),
                        name: q.name.clone().unwrap_or_default(),
                        description: owned(q.description.as_ref()),
                        priority: noval!(q.priority.as_ref()).narrow(),
                        usage_factor: noval!(q.usage_factor.as_ref()),
                        usage_threshold: noval!(q.usage_threshold.as_ref()),
                        limit_factor: noval!(at!(q, limits, factor)),
                        grace_time_seconds: id32(at!(q, limits, grace_time).copied()),
                        flags: strings(q.flags.clone()),
                        preempt: strings(at!(q, preempt, list).cloned()),
                        preempt_mode: strings(at!(q, preempt, mode).cloned()),
                        preempt_exempt_seconds: limit32!(q, preempt, exempt_time),
                        limits: QosLimits {
                            max_jobs_per_user: limit32!(
                                q,
                                limits,
                                max,
                                jobs,
                                active_jobs,
                                per,
                                user
                            ),
                            max_jobs_per_account: limit32!(
                                q,
                                limits,
                                max,
                                jobs,
                                active_jobs,
                                per,
                                account
                            ),
                            max_submit_jobs_per_user: limit32!(q, limits, max, jobs, per, user),
                            max_submit_jobs_per_account: limit32!(
                                q, limits, max, jobs, per, account
                            ),
                            max_jobs_accrue_per_user: limit32!(q, limits, max, accruing, per, user),
                            max_jobs_accrue_per_account: limit32!(
                                q, limits, max, accruing, per, account
                            ),
                            max_tres_per_user: tres!(at!(q, limits, max, tres, per, user)),
                            max_tres_per_account: tres!(at!(q, limits, max, tres, per, account)),
                            max_tres_per_job: tres!(at!(q, limits, max, tres, per, job)),
                            max_tres_per_node: tres!(at!(q, limits, max, tres, per, node)),
                            max_tres_minutes_per_job: tres!(at!(
                                q, limits, max, tres, minutes, per, job
                            )),
                            max_wall_minutes_per_job: limit32!(
                                q, limits, max, wall_clock, per, job
                            ),
                            grp_jobs: limit32!(q, limits, max, active_jobs, count),
                            grp_jobs_accrue: limit32!(q, limits, max, active_jobs, accruing),
                            grp_submit_jobs: grp_submit_jobs(at!(q, limits, max, jobs)),
                            grp_tres: tres!(at!(q, limits, max, tres, total)),
                            grp_tres_minutes: grp_tres_minutes(at!(q, limits, max, tres, minutes)),
                            grp_wall_minutes: limit32!(q, limits, max, wall_clock, per, qos),
                            min_tres_per_job: tres!(at!(q, limits, min, tres, per, job)),
                            min_priority_threshold: limit32!(q, limits, min, priority_threshold),
                        },
                    })
                    .collect()
            }))
        }

        pub(in crate::ops::accounting) async fn clusters(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<ClusterRecord>>, Error> {
            let response = client.request::<ClustersResp>(request).await?;
            Ok(response.map(|r| {
                r.clusters
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|c| ClusterRecord {
                        name: c.name.clone().unwrap_or_default(),
                        controller_host: owned(at!(c, controller, host)),
                        controller_port: at!(c, controller, port)
                            .and_then(|p| u16::try_from(*p).ok()),
                        nodes: owned(c.nodes.as_ref()),
                        rpc_version: id32(c.rpc_version),
                        tres: tres!(c.tres.as_ref()),
                        flags: strings(c.flags.clone()),
                    })
                    .collect()
            }))
        }

        pub(in crate::ops::accounting) async fn tres(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<TresRecord>>, Error> {
            let response = client.request::<TresResp>(request).await?;
            Ok(response.map(|r| {
                r.tres
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|t| TresRecord {
                        id: id32(t.id),
                        kind: t.type_.clone().unwrap_or_default(),
                        name: owned(t.name.as_ref()),
                        count: t.count,
                    })
                    .collect()
            }))
        }

        pub(in crate::ops::accounting) async fn wckeys(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<Wckey>>, Error> {
            let response = client.request::<WckeyResp>(request).await?;
            Ok(response.map(|r| {
                r.wckeys
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|w| Wckey {
                        id: id32(w.id),
                        name: w.name.clone().unwrap_or_default(),
                        user: w.user.clone().unwrap_or_default(),
                        cluster: w.cluster.clone().unwrap_or_default(),
                        flags: strings(w.flags.clone()),
                    })
                    .collect()
            }))
        }

        pub(in crate::ops::accounting) async fn jobs(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<JobRecord>>, Error> {
            let response = client.request::<JobsResp>(request).await?;
            Ok(response.map(|r| {
                r.jobs
                    .iter()
                    .flat_map(|l| l.iter())
                    .map(|j| JobRecord {
                        id: id32(j.job_id).unwrap_or_default(),
                        name: j.name.clone().unwrap_or_default(),
                        user: j.user.clone().unwrap_or_default(),
                        group: owned(j.group.as_ref()),
                        account: owned(j.account.as_ref()),
                        partition: owned(j.partition.as_ref()),
                        cluster: owned(j.cluster.as_ref()),
                        qos: owned(j.qos.as_ref()),
                        wckey: owned(at!(j, wckey, wckey)),
                        state: strings(at!(j, state, current).cloned())
                            .first()
                            .map_or(JobState::default(), |s| JobState::parse(s)),
                        state_reason: owned(at!(j, state, reason)).filter(|r| r != "None"),
                        exit_code: exit_code!(j.exit_code.as_ref()),
                        derived_exit_code: exit_code!(j.derived_exit_code.as_ref()),
                        submit_time: epoch(at!(j, time, submission).copied()),
                        eligible_time: epoch(at!(j, time, eligible).copied()),
                        start_time: epoch(at!(j, time, start).copied()),
                        end_time: epoch(at!(j, time, end).copied()),
                        elapsed_seconds: at!(j, time, elapsed)
                            .and_then(|e| u64::try_from(*e).ok())
                            .unwrap_or_default(),
                        time_limit_minutes: limit32!(j, time, limit),
                        nodes: owned(j.nodes.as_ref()).filter(|n| n != "None assigned"),
                        array_job_id: id32(at!(j, array, job_id).copied()).filter(|id| *id > 0),
                        array_task_id: noval!(at!(j, array, task_id)).narrow::<u32>().value(),
                        tres_requested: tres!(at!(j, tres, requested)),
                        tres_allocated: tres!(at!(j, tres, allocated)),
                        steps: j
                            .steps
                            .iter()
                            .flat_map(|l| l.iter())
                            .map(|s| StepRecord {
                                id: at!(s, step, id)
                                    .map(|id| {
                                        id.rsplit_once('.')
                                            .map_or(id.as_str(), |(_, s)| s)
                                            .to_string()
                                    })
                                    .unwrap_or_default(),
                                name: owned(at!(s, step, name)),
                                state: strings(s.state.clone())
                                    .first()
                                    .map_or(JobState::default(), |s| JobState::parse(s)),
                                exit_code: exit_code!(s.exit_code.as_ref()),
                                start_time: epoch(noval!(at!(s, time, start)).value()),
                                end_time: epoch(noval!(at!(s, time, end)).value()),
                                elapsed_seconds: at!(s, time, elapsed)
                                    .and_then(|e| u64::try_from(*e).ok())
                                    .unwrap_or_default(),
                                nodes: owned(at!(s, nodes, range)),
                                tasks: id32(at!(s, tasks, count).copied()),
                                tres_allocated: tres!(at!(s, tres, allocated)),
                                cpu_seconds: [
                                    at!(s, time, user, seconds),
                                    at!(s, time, system, seconds),
                                ]
                                .into_iter()
                                .flatten()
                                .filter_map(|v| u64::try_from(*v).ok())
                                .sum(),
                            })
                            .collect(),
                    })
                    .collect()
            }))
        }
    };
}

/// The version-dependent pieces of REST v0.0.42 and later: `$jobs` and `$minutes` are
/// the QoS's `limits.max.jobs` and `limits.max.tres.minutes` types.
macro_rules! accounting_v42_on {
    ($jobs:ty, $minutes:ty) => {
        fn assoc_id(id: Option<&i64>) -> Option<u32> {
            crate::ops::id32(id.copied())
        }

        fn grp_submit_jobs(jobs: Option<&$jobs>) -> crate::Limit<u32> {
            noval!(jobs.and_then(|j| j.count.as_ref())).narrow()
        }

        fn grp_tres_minutes(minutes: Option<&$minutes>) -> crate::Tres {
            tres!(minutes.and_then(|m| m.total.as_ref()))
        }
    };
}
