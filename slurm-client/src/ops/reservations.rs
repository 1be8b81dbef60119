//! Reservations: list, get, create, update, delete. Writing needs REST v0.0.43+ (Slurm
//! 25.05+); older versions only read.

use crate::model::{
    Reservation, ReservationList, ReservationSpec, ReservationUpdate, check_reservation_name,
};
use crate::{Client, Error, Meta, Request, Response, path_segment};

/// The request body of a create or update, version-neutral; each version copies it into
/// its generated `ReservationDescMsg`.
#[derive(Debug, Default)]
pub(crate) struct Desc {
    name: String,
    start_time: Option<i64>,
    end_time: Option<i64>,
    duration_minutes: Option<u32>,
    nodes: Option<Vec<String>>,
    node_count: Option<u32>,
    core_count: Option<u32>,
    users: Option<Vec<String>>,
    accounts: Option<Vec<String>>,
    partition: Option<String>,
    flags: Option<Vec<String>>,
    features: Option<String>,
    comment: Option<String>,
}

impl Client {
    /// Lists reservations (`GET /slurm/vX/reservations/`). With `update_time`, an
    /// unchanged set gives [`ReservationList::unchanged`].
    pub async fn list_reservations(
        &self,
        update_time: Option<i64>,
    ) -> Result<Response<ReservationList>, Error> {
        let version = self.version().await?;
        let mut request = Request::get(format!("/slurm/{version}/reservations/"));
        if let Some(time) = update_time {
            let value = super::jobs::update_time_param(version, time);
            request = request.query("update_time", value);
        }
        match dispatch!(self, "reservation listing", list(self, request)) {
            Err(Error::Status { status: 304, .. }) => Ok(Response {
                value: ReservationList {
                    unchanged: true,
                    ..ReservationList::default()
                },
                warnings: Vec::new(),
                meta: Meta::default(),
                status: 304,
            }),
            other => other,
        }
    }

    /// One reservation (`GET /slurm/vX/reservation/{name}`); [`Error::NotFound`] if unknown.
    pub async fn get_reservation(&self, name: &str) -> Result<Response<Reservation>, Error> {
        let path = reservation_path(self, name).await?;
        let missing = |e: &crate::SlurmError| e.error_number == Some(0);
        let response = dispatch!(
            self,
            "reservation query",
            list(self, Request::get(path.clone()))
        )
        .map_err(|e| super::rejected_as_not_found(e, missing))?;
        super::single(response, path, |list| list.reservations, |r| r.name == name)
    }

    /// Creates a reservation (`POST /slurm/vX/reservation`). REST v0.0.43+; older versions
    /// give [`Error::Unsupported`].
    pub async fn create_reservation(&self, spec: &ReservationSpec) -> Result<Response<()>, Error> {
        spec.validate()
            .map_err(|e| Error::Config(format!("invalid reservation {:?}: {e}", spec.name)))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let s = spec.clone();
        let desc = Desc {
            name: s.name,
            start_time: Some(s.start_time.unwrap_or(now)),
            end_time: s.end_time,
            duration_minutes: s.duration_minutes,
            nodes: (!s.nodes.is_empty()).then_some(s.nodes),
            node_count: s.node_count,
            core_count: s.core_count,
            users: (!s.users.is_empty()).then_some(s.users),
            accounts: (!s.accounts.is_empty()).then_some(s.accounts),
            partition: s.partition,
            flags: (!s.flags.is_empty()).then_some(s.flags),
            features: s.features,
            comment: s.comment,
        };
        let path = format!("/slurm/{}/reservation", self.version().await?);
        dispatch!(self, "reservation create", write(self, path, desc))
    }

    /// Changes a reservation (`POST /slurm/vX/reservation` with only the changed fields).
    /// REST v0.0.43+; older versions give [`Error::Unsupported`]. [`Error::NotFound`] if
    /// there is no such reservation (it is not created).
    pub async fn update_reservation(
        &self,
        name: &str,
        update: &ReservationUpdate,
    ) -> Result<Response<()>, Error> {
        check_reservation_name(name).map_err(Error::Config)?;
        if *update == ReservationUpdate::default() {
            return Err(Error::Config(format!(
                "update of reservation {name:?} changes nothing"
            )));
        }
        // POST /reservation creates what does not exist: make sure it does.
        self.get_reservation(name).await?;
        let u = update.clone();
        let desc = Desc {
            name: name.to_string(),
            start_time: u.start_time,
            end_time: u.end_time,
            duration_minutes: u.duration_minutes,
            nodes: u.nodes,
            node_count: u.node_count,
            users: u.users,
            accounts: u.accounts,
            flags: u.flags,
            comment: u.comment,
            ..Desc::default()
        };
        let path = format!("/slurm/{}/reservation", self.version().await?);
        dispatch!(self, "reservation update", write(self, path, desc))
    }

    /// Deletes a reservation (`DELETE /slurm/vX/reservation/{name}`). REST v0.0.43+.
    pub async fn delete_reservation(&self, name: &str) -> Result<Response<()>, Error> {
        let path = reservation_path(self, name).await?;
        dispatch!(self, "reservation delete", delete(self, path))
    }
}

async fn reservation_path(client: &Client, name: &str) -> Result<String, Error> {
    check_reservation_name(name).map_err(Error::Config)?;
    let version = client.version().await?;
    Ok(format!(
        "/slurm/{version}/reservation/{}",
        path_segment(name)
    ))
}

/// Reading, shared by every version; expects the aliases `ReservationsResp` and
/// `ReservationItem`.
macro_rules! reservations_read {
    () => {
        use crate::model::{Reservation, ReservationList, Tres, epoch, text};
        use crate::ops::{id32, strings};
        use crate::{Client, Error, Request, Response};

        pub(super) async fn list(
            client: &Client,
            request: Request,
        ) -> Result<Response<ReservationList>, Error> {
            let response = client.request::<ReservationsResp>(request).await?;
            Ok(response.map(|r| ReservationList {
                reservations: r
                    .reservations
                    .map(Vec::<ReservationItem>::from)
                    .unwrap_or_default()
                    .into_iter()
                    .map(reservation)
                    .collect(),
                last_update: epoch(noval!(r.last_update).value()),
                unchanged: false,
            }))
        }

        fn reservation(r: ReservationItem) -> Reservation {
            let list = |s: Option<String>| -> Vec<String> {
                s.unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            };
            Reservation {
                name: r.name.unwrap_or_default(),
                nodes: text(r.node_list),
                node_count: id32(r.node_count).unwrap_or_default(),
                core_count: id32(r.core_count).unwrap_or_default(),
                start_time: epoch(noval!(r.start_time).value()),
                end_time: epoch(noval!(r.end_time).value()),
                flags: strings(r.flags),
                users: list(r.users),
                accounts: list(r.accounts),
                groups: list(r.groups),
                partition: text(r.partition),
                features: text(r.features),
                licenses: text(r.licenses),
                tres: Tres::parse(r.tres.as_deref().unwrap_or_default()),
                burst_buffer: text(r.burst_buffer),
                max_start_delay: id32(r.max_start_delay),
            }
        }
    };
}

/// Writing (v0.0.43+); expects the aliases `DescMsg`, `ModResp` and `PlainResp`.
#[allow(unused_macros)] // not every version needs it
macro_rules! reservations_write {
    () => {
        use crate::model::Limit;
        use crate::ops::wire;

        pub(super) async fn write(
            client: &Client,
            path: String,
            desc: super::Desc,
        ) -> Result<Response<()>, Error> {
            let mut body = DescMsg::default();
            body.name = Some(desc.name);
            if let Some(t) = desc.start_time {
                body.start_time = wire(Limit::Value(t));
            }
            if let Some(t) = desc.end_time {
                body.end_time = wire(Limit::Value(t));
            }
            if let Some(m) = desc.duration_minutes {
                body.duration = wire(Limit::Value(m));
            }
            if let Some(n) = desc.node_count {
                body.node_count = wire(Limit::Value(n));
            }
            if let Some(n) = desc.core_count {
                body.core_count = wire(Limit::Value(n));
            }
            body.node_list = desc.nodes.map(Into::into);
            body.users = desc.users.map(Into::into);
            body.accounts = desc.accounts.map(Into::into);
            body.partition = desc.partition;
            body.flags = desc.flags.map(Into::into);
            body.features = desc.features;
            body.comment = desc.comment;
            let request = Request::post(path).json(&body);
            Ok(client.request::<ModResp>(request).await?.map(|_| ()))
        }

        pub(super) async fn delete(client: &Client, path: String) -> Result<Response<()>, Error> {
            let request = Request::delete(path);
            Ok(client.request::<PlainResp>(request).await?.map(|_| ()))
        }
    };
}

/// v0.0.40–42 only read reservations.
#[allow(unused_macros)] // not every version needs it
macro_rules! reservations_read_only {
    () => {
        unsupported! {
            write(path: String, desc: super::Desc) -> Response<()> = "reservation create/update";
            delete(path: String) -> Response<()> = "reservation delete";
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type ReservationsResp = t::V0040OpenapiReservationResp;
    type ReservationItem = t::V0040ReservationInfo;
    reservations_read!();
    reservations_read_only!();
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type ReservationsResp = t::V0041OpenapiReservationResp;
    type ReservationItem = t::V0041OpenapiReservationRespReservationsItem;
    reservations_read!();
    reservations_read_only!();
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type ReservationsResp = t::V0042OpenapiReservationResp;
    type ReservationItem = t::V0042ReservationInfo;
    reservations_read!();
    reservations_read_only!();
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type ReservationsResp = t::V0043OpenapiReservationResp;
    type ReservationItem = t::V0043ReservationInfo;
    type DescMsg = t::V0043ReservationDescMsg;
    type ModResp = t::V0043OpenapiReservationModResp;
    type PlainResp = t::V0043OpenapiResp;
    reservations_read!();
    reservations_write!();
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type ReservationsResp = t::V0044OpenapiReservationResp;
    type ReservationItem = t::V0044ReservationInfo;
    type DescMsg = t::V0044ReservationDescMsg;
    type ModResp = t::V0044OpenapiReservationModResp;
    type PlainResp = t::V0044OpenapiResp;
    reservations_read!();
    reservations_write!();
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type ReservationsResp = t::V0045OpenapiReservationResp;
    type ReservationItem = t::V0045ReservationInfo;
    type DescMsg = t::V0045ReservationDescMsg;
    type ModResp = t::V0045OpenapiReservationModResp;
    type PlainResp = t::V0045OpenapiResp;
    reservations_read!();
    reservations_write!();
}
