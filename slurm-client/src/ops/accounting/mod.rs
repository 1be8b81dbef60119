//! Accounting in slurmdbd (`/slurmdb/vX/…`): accounts, users, associations, QoS,
//! clusters, TRES, WCKeys and job history — what `sacctmgr` and `sacct` show.
//!
//! Every REST version v0.0.40–v0.0.45 has all of these. Lookups of one record answer
//! [`Error::NotFound`] when slurmdbd finds nothing (it says so with status 200 and an
//! empty list). Request bodies have the same JSON shape in every version, so they are
//! built here once; the answers are decoded per version (`body.rs`, `versions.rs`).

use serde_json::{Value, json};

use crate::model::{
    Account, AccountSpec, Association, AssociationQuery, ClusterRecord, JobRecord, JobRecordQuery,
    Qos, QosSpec, TresRecord, User, UserSpec, Wckey,
};
use crate::{Client, Error, Method, Request, Response, Tres, path_segment};

#[macro_use]
mod body;
mod versions;
use versions::*;

impl Client {
    /// Lists accounts (`GET /slurmdb/vX/accounts/`).
    pub async fn list_accounts(&self) -> Result<Response<Vec<Account>>, Error> {
        let request = Request::get(db_path(self, "accounts/").await?);
        dispatch!(self, "account listing", accounts(self, request))
    }

    /// One account (`GET /slurmdb/vX/account/{name}`); [`Error::NotFound`] if there is none.
    pub async fn get_account(&self, name: &str) -> Result<Response<Account>, Error> {
        let path = named_path(self, "account", name).await?;
        let response = dispatch!(self, "account query", accounts(self, Request::get(&path)))?;
        single(response, path, |a: &Account| a.name == name)
    }

    /// Creates an account with its association (`POST /slurmdb/vX/accounts_association/`,
    /// `sacctmgr add account`).
    pub async fn create_account(&self, spec: &AccountSpec) -> Result<Response<()>, Error> {
        spec.validate()
            .map_err(|e| Error::Config(format!("invalid account: {e}")))?;
        let mut association = json!({});
        if let Some(parent) = &spec.parent {
            association["parent"] = json!(parent);
        }
        let mut condition = json!({ "accounts": [spec.name], "association": association });
        if !spec.clusters.is_empty() {
            condition["clusters"] = json!(spec.clusters);
        }
        let mut account = json!({});
        if let Some(d) = &spec.description {
            account["description"] = json!(d);
        }
        if let Some(o) = &spec.organization {
            account["organization"] = json!(o);
        }
        let body = json!({ "association_condition": condition, "account": account });
        self.post_db("account creation", "accounts_association/", &body)
            .await
    }

    /// Deletes an account (`DELETE /slurmdb/vX/account/{name}`); slurmdbd refuses while
    /// it still has users or running jobs.
    pub async fn delete_account(&self, name: &str) -> Result<Response<()>, Error> {
        let path = named_path(self, "account", name).await?;
        let request = Request::delete(path);
        dispatch!(self, "account deletion", plain(self, request))
    }

    /// Lists users with their associations and coordinator roles
    /// (`GET /slurmdb/vX/users/?with_assocs&with_coords`).
    pub async fn list_users(&self) -> Result<Response<Vec<User>>, Error> {
        let request = Request::get(db_path(self, "users/").await?)
            .flag("with_assocs")
            .flag("with_coords");
        dispatch!(self, "user listing", users(self, request))
    }

    /// One user (`GET /slurmdb/vX/user/{name}`); [`Error::NotFound`] if there is none.
    pub async fn get_user(&self, name: &str) -> Result<Response<User>, Error> {
        let path = named_path(self, "user", name).await?;
        let request = Request::get(&path).flag("with_assocs").flag("with_coords");
        let response = dispatch!(self, "user query", users(self, request))?;
        single(response, path, |u: &User| u.name == name)
    }

    /// Adds a user to an account, creating the user if needed
    /// (`POST /slurmdb/vX/users_association/`, `sacctmgr add user`).
    pub async fn create_user(&self, spec: &UserSpec) -> Result<Response<()>, Error> {
        spec.validate()
            .map_err(|e| Error::Config(format!("invalid user: {e}")))?;
        let mut condition = json!({
            "users": [spec.name],
            "accounts": [spec.account],
        });
        if !spec.clusters.is_empty() {
            condition["clusters"] = json!(spec.clusters);
        }
        if let Some(p) = &spec.partition {
            condition["partitions"] = json!([p]);
        }
        let default = spec.default_account.as_ref().unwrap_or(&spec.account);
        let mut user = json!({ "defaultaccount": default });
        if let Some(level) = &spec.administrator_level {
            user["adminlevel"] = json!([level]);
        }
        let body = json!({ "association_condition": condition, "user": user });
        self.post_db("user creation", "users_association/", &body)
            .await
    }

    /// Deletes a user and all its associations (`DELETE /slurmdb/vX/user/{name}`).
    pub async fn delete_user(&self, name: &str) -> Result<Response<()>, Error> {
        let path = named_path(self, "user", name).await?;
        dispatch!(self, "user deletion", plain(self, Request::delete(path)))
    }

    /// Lists associations with their limits and shares (`GET /slurmdb/vX/associations/`),
    /// filtered by `query`.
    pub async fn list_associations(
        &self,
        query: &AssociationQuery,
    ) -> Result<Response<Vec<Association>>, Error> {
        let mut request = Request::get(db_path(self, "associations/").await?);
        for (key, value) in query.params() {
            request = request.query(key, value);
        }
        dispatch!(self, "association listing", associations(self, request))
    }

    /// The association of exactly `account`, `user` (`None` for the account's own) and
    /// `cluster` on all partitions; [`Error::NotFound`] if there is none.
    pub async fn get_association(
        &self,
        cluster: &str,
        account: &str,
        user: Option<&str>,
    ) -> Result<Response<Association>, Error> {
        // `/association/` refuses queries that match more than one record (an account's
        // own association matches its users' too), so list and pick the exact one.
        let path = db_path(self, "associations/").await?;
        let mut request = Request::get(&path)
            .query("cluster", cluster)
            .query("account", account);
        if let Some(user) = user {
            request = request.query("user", user);
        }
        let response = dispatch!(self, "association query", associations(self, request))?;
        single(response, path, |a: &Association| {
            a.cluster == cluster
                && a.account == account
                && a.user.as_deref() == user
                && a.partition.is_none()
        })
    }

    /// Deletes the associations `query` selects (`DELETE /slurmdb/vX/associations/`). An
    /// empty query is refused: it would delete every association.
    pub async fn delete_associations(
        &self,
        query: &AssociationQuery,
    ) -> Result<Response<()>, Error> {
        if query.is_empty() {
            return Err(Error::Config(
                "refusing to delete associations without a filter".into(),
            ));
        }
        let mut request = Request::delete(db_path(self, "associations/").await?);
        for (key, value) in query.params() {
            request = request.query(key, value);
        }
        dispatch!(self, "association deletion", plain(self, request))
    }

    /// Lists QoS with their limits (`GET /slurmdb/vX/qos/`).
    pub async fn list_qos(&self) -> Result<Response<Vec<Qos>>, Error> {
        let request = Request::get(db_path(self, "qos/").await?);
        dispatch!(self, "QoS listing", qos(self, request))
    }

    /// One QoS (`GET /slurmdb/vX/qos/{name}`); [`Error::NotFound`] if there is none.
    pub async fn get_qos(&self, name: &str) -> Result<Response<Qos>, Error> {
        let path = named_path(self, "qos", name).await?;
        let response = dispatch!(self, "QoS query", qos(self, Request::get(&path)))?;
        single(response, path, |q: &Qos| q.name == name)
    }

    /// Creates a QoS, or changes the fields `spec` sets of an existing one
    /// (`POST /slurmdb/vX/qos/`).
    pub async fn put_qos(&self, spec: &QosSpec) -> Result<Response<()>, Error> {
        spec.validate()
            .map_err(|e| Error::Config(format!("invalid QoS: {e}")))?;
        let body = json!({ "qos": [qos_body(spec)] });
        self.post_db("QoS update", "qos/", &body).await
    }

    /// Deletes a QoS (`DELETE /slurmdb/vX/qos/{name}`).
    pub async fn delete_qos(&self, name: &str) -> Result<Response<()>, Error> {
        let path = named_path(self, "qos", name).await?;
        dispatch!(self, "QoS deletion", plain(self, Request::delete(path)))
    }

    /// Lists the clusters slurmdbd knows (`GET /slurmdb/vX/clusters/`).
    pub async fn list_clusters(&self) -> Result<Response<Vec<ClusterRecord>>, Error> {
        let request = Request::get(db_path(self, "clusters/").await?);
        dispatch!(self, "cluster listing", clusters(self, request))
    }

    /// One cluster (`GET /slurmdb/vX/cluster/{name}`); [`Error::NotFound`] if unknown.
    pub async fn get_cluster(&self, name: &str) -> Result<Response<ClusterRecord>, Error> {
        let path = named_path(self, "cluster", name).await?;
        let response = dispatch!(self, "cluster query", clusters(self, Request::get(&path)))?;
        single(response, path, |c: &ClusterRecord| c.name == name)
    }

    /// Lists the TRES types slurmdbd tracks (`GET /slurmdb/vX/tres/`).
    pub async fn list_tres(&self) -> Result<Response<Vec<TresRecord>>, Error> {
        let request = Request::get(db_path(self, "tres/").await?);
        dispatch!(self, "TRES listing", tres(self, request))
    }

    /// Lists WCKeys (`GET /slurmdb/vX/wckeys/`).
    pub async fn list_wckeys(&self) -> Result<Response<Vec<Wckey>>, Error> {
        let request = Request::get(db_path(self, "wckeys/").await?);
        dispatch!(self, "WCKey listing", wckeys(self, request))
    }

    /// One WCKey by database id (`GET /slurmdb/vX/wckey/{id}`); [`Error::NotFound`] if
    /// there is none.
    pub async fn get_wckey(&self, id: u32) -> Result<Response<Wckey>, Error> {
        // Slurm 24.11 answers `GET /wckey/{id}` with nothing, so list and pick.
        let path = db_path(self, "wckeys/").await?;
        let response = dispatch!(self, "WCKey query", wckeys(self, Request::get(&path)))?;
        single(response, format!("{path} (id {id})"), |w: &Wckey| {
            w.id == Some(id)
        })
    }

    /// Creates WCKey `name` for `user` on `cluster` (`POST /slurmdb/vX/wckeys/`). The user
    /// must exist.
    pub async fn create_wckey(
        &self,
        name: &str,
        user: &str,
        cluster: &str,
    ) -> Result<Response<()>, Error> {
        for (what, value) in [("WCKey", name), ("user", user), ("cluster", cluster)] {
            crate::model::valid_name(what, value)
                .map_err(|e| Error::Config(format!("invalid WCKey: {e}")))?;
        }
        let body = json!({ "wckeys": [{ "name": name, "user": user, "cluster": cluster }] });
        self.post_db("WCKey creation", "wckeys/", &body).await
    }

    /// Deletes a WCKey by database id (`DELETE /slurmdb/vX/wckey/{id}`).
    ///
    /// Known server bug: Slurm 24.11 and 26.05 answer "found nothing" (a warning, status
    /// 200) and keep the key.
    pub async fn delete_wckey(&self, id: u32) -> Result<Response<()>, Error> {
        let path = named_path(self, "wckey", &id.to_string()).await?;
        dispatch!(self, "WCKey deletion", plain(self, Request::delete(path)))
    }

    /// Job history from slurmdbd (`GET /slurmdb/vX/jobs/`, like `sacct`), filtered by
    /// `query`. Finished jobs appear a few seconds after they end.
    pub async fn job_history(
        &self,
        query: &JobRecordQuery,
    ) -> Result<Response<Vec<JobRecord>>, Error> {
        let version = self.version().await?;
        let mut request = Request::get(db_path(self, "jobs/").await?);
        for (key, value) in query.params() {
            request = request.query(key, value);
        }
        for (key, time) in [
            ("start_time", query.start_time),
            ("end_time", query.end_time),
        ] {
            if let Some(time) = time {
                request = request.query(key, time_param(version, time));
            }
        }
        dispatch!(self, "job history", jobs(self, request))
    }

    /// One job's accounting record (`GET /slurmdb/vX/job/{id}`); [`Error::NotFound`] if
    /// slurmdbd has none.
    pub async fn get_job_record(&self, id: u32) -> Result<Response<JobRecord>, Error> {
        let path = named_path(self, "job", &id.to_string()).await?;
        let response = dispatch!(self, "job record query", jobs(self, Request::get(&path)))?;
        single(response, path, |j: &JobRecord| j.id == id)
    }

    async fn post_db(
        &self,
        operation: &'static str,
        path: &str,
        body: &Value,
    ) -> Result<Response<()>, Error> {
        let request = Request::post(db_path(self, path).await?).json(body);
        dispatch!(self, operation, plain(self, request))
    }
}

/// A time query value. v0.0.40 and v0.0.41 reject epoch numbers ("Parsing of … for
/// timestamp failed"), so they get Slurm's relative form `now-<n>seconds`/`now+<n>seconds`,
/// computed from this machine's clock.
fn time_param(version: crate::ApiVersion, time: i64) -> String {
    if version >= crate::ApiVersion::V0_0_42 {
        return time.to_string();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if time <= now {
        format!("now-{}seconds", now - time)
    } else {
        format!("now+{}seconds", time - now)
    }
}

async fn db_path(client: &Client, rest: &str) -> Result<String, Error> {
    let version = client.version().await?;
    Ok(format!("/slurmdb/{version}/{rest}"))
}

async fn named_path(client: &Client, kind: &str, name: &str) -> Result<String, Error> {
    crate::model::valid_name(kind, name)
        .map_err(|e| Error::Config(format!("invalid {kind} lookup: {e}")))?;
    db_path(client, &format!("{kind}/{}", path_segment(name))).await
}

/// The record of a one-record lookup: the first that `matches`, else the first; NotFound
/// when slurmdbd found nothing.
fn single<T>(
    response: Response<Vec<T>>,
    path: String,
    matches: impl Fn(&T) -> bool,
) -> Result<Response<T>, Error> {
    if response.value.is_empty() || !response.value.iter().any(&matches) {
        return Err(Error::NotFound {
            method: Method::GET,
            path,
            status: response.status,
            errors: Vec::new(),
        });
    }
    Ok(response.map(|mut list| {
        let i = list.iter().position(&matches).unwrap_or(0);
        list.swap_remove(i)
    }))
}

/// The wire form of a TRES list: `[{type, name, count}]`.
fn tres_body(tres: &Tres) -> Value {
    let entries: Vec<Value> = tres
        .entries
        .keys()
        .map(|key| {
            let (kind, name) = key.split_once('/').unwrap_or((key, ""));
            json!({ "type": kind, "name": name, "count": tres.count(key).unwrap_or(0) })
        })
        .collect();
    Value::Array(entries)
}

fn limit_body<N: serde::Serialize + Default>(limit: crate::Limit<N>) -> Value {
    serde_json::to_value(crate::model::Wire::from(limit)).unwrap_or(Value::Null)
}

/// A QoS request body with only the fields `spec` sets.
fn qos_body(spec: &QosSpec) -> Value {
    let mut q = json!({ "name": spec.name });
    if let Some(d) = &spec.description {
        q["description"] = json!(d);
    }
    if let Some(p) = spec.priority {
        q["priority"] = limit_body(p);
    }
    if let Some(f) = spec.usage_factor {
        q["usage_factor"] = limit_body(f);
    }
    if let Some(flags) = &spec.flags {
        q["flags"] = json!(flags);
    }
    if spec.preempt.is_some() || spec.preempt_mode.is_some() {
        let mut p = json!({});
        if let Some(list) = &spec.preempt {
            p["list"] = json!(list);
        }
        if let Some(mode) = &spec.preempt_mode {
            p["mode"] = json!(mode);
        }
        q["preempt"] = p;
    }
    let mut max = json!({});
    if let Some(l) = spec.max_jobs_per_user {
        max["jobs"]["active_jobs"]["per"]["user"] = limit_body(l);
    }
    if let Some(l) = spec.max_submit_jobs_per_user {
        max["jobs"]["per"]["user"] = limit_body(l);
    }
    if let Some(l) = spec.grp_jobs {
        max["active_jobs"]["count"] = limit_body(l);
    }
    if let Some(l) = spec.max_wall_minutes_per_job {
        max["wall_clock"]["per"]["job"] = limit_body(l);
    }
    if let Some(t) = &spec.max_tres_per_user {
        max["tres"]["per"]["user"] = tres_body(t);
    }
    if let Some(t) = &spec.max_tres_per_job {
        max["tres"]["per"]["job"] = tres_body(t);
    }
    if let Some(t) = &spec.grp_tres {
        max["tres"]["total"] = tres_body(t);
    }
    if max != json!({}) {
        q["limits"] = json!({ "max": max });
    }
    q
}
