//! Licenses.

use crate::model::License;
use crate::{Client, Error, Request, Response};

impl Client {
    /// The licenses slurmctld manages (`GET /slurm/vX/licenses/`).
    pub async fn licenses(&self) -> Result<Response<Vec<License>>, Error> {
        let version = self.version().await?;
        let request = Request::get(format!("/slurm/{version}/licenses/"));
        dispatch!(self, "license listing", licenses(self, request))
    }
}

/// Shared by every version; expects the aliases `LicensesResp` and `LicenseItem`.
macro_rules! licenses_version {
    () => {
        use crate::model::License;
        use crate::{Client, Error, Request, Response};

        pub(super) async fn licenses(
            client: &Client,
            request: Request,
        ) -> Result<Response<Vec<License>>, Error> {
            let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or_default();
            let response = client.request::<LicensesResp>(request).await?;
            Ok(response.map(|r| {
                r.licenses
                    .map(Vec::<LicenseItem>::from)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|l| License {
                        name: l.license_name.unwrap_or_default(),
                        total: count(l.total),
                        used: count(l.used),
                        free: count(l.free),
                        reserved: count(l.reserved),
                        remote: l.remote.unwrap_or_default(),
                    })
                    .collect()
            }))
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type LicensesResp = t::V0040OpenapiLicensesResp;
    type LicenseItem = t::V0040License;
    licenses_version!();
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type LicensesResp = t::SlurmV0041GetLicensesResponse;
    type LicenseItem = t::SlurmV0041GetLicensesResponseLicensesItem;
    licenses_version!();
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type LicensesResp = t::V0042OpenapiLicensesResp;
    type LicenseItem = t::V0042License;
    licenses_version!();
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type LicensesResp = t::V0043OpenapiLicensesResp;
    type LicenseItem = t::V0043License;
    licenses_version!();
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type LicensesResp = t::V0044OpenapiLicensesResp;
    type LicenseItem = t::V0044License;
    licenses_version!();
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type LicensesResp = t::V0045OpenapiLicensesResp;
    type LicenseItem = t::V0045License;
    licenses_version!();
}
