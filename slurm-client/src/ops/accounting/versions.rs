//! One module per REST version: the generated response types behind the aliases
//! `accounting_version!` expects.

#[cfg(feature = "v0_0_40")]
pub(super) mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type AccountsResp = t::V0040OpenapiAccountsResp;
    type UsersResp = t::V0040OpenapiUsersResp;
    type AssocsResp = t::V0040OpenapiAssocsResp;
    type QosResp = t::V0040OpenapiSlurmdbdQosResp;
    type ClustersResp = t::V0040OpenapiClustersResp;
    type TresResp = t::V0040OpenapiTresResp;
    type WckeyResp = t::V0040OpenapiWckeyResp;
    type JobsResp = t::V0040OpenapiSlurmdbdJobsResp;
    type PlainResp = t::V0040OpenapiResp;
    accounting_version!();

    // v0.0.40 nests the association id in a short association record.
    fn assoc_id(id: Option<&t::V0040AssocShort>) -> Option<u32> {
        crate::ops::id32(id.and_then(|a| a.id))
    }

    // No `GrpSubmitJobs` and `GrpTRESMins` of QoS before v0.0.42.
    fn grp_submit_jobs<T>(_: Option<T>) -> crate::Limit<u32> {
        crate::Limit::Unset
    }

    fn grp_tres_minutes<T>(_: Option<T>) -> crate::Tres {
        crate::Tres::default()
    }
}

#[cfg(feature = "v0_0_41")]
pub(super) mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type AccountsResp = t::V0041OpenapiAccountsResp;
    type UsersResp = t::V0041OpenapiUsersResp;
    type AssocsResp = t::V0041OpenapiAssocsResp;
    type QosResp = t::V0041OpenapiSlurmdbdQosResp;
    type ClustersResp = t::V0041OpenapiClustersResp;
    type TresResp = t::V0041OpenapiTresResp;
    type WckeyResp = t::V0041OpenapiWckeyResp;
    type JobsResp = t::V0041OpenapiSlurmdbdJobsResp;
    type PlainResp = t::V0041OpenapiResp;
    accounting_version!();

    fn assoc_id(id: Option<&i64>) -> Option<u32> {
        crate::ops::id32(id.copied())
    }

    // No `GrpSubmitJobs` and `GrpTRESMins` of QoS before v0.0.42.
    fn grp_submit_jobs<T>(_: Option<T>) -> crate::Limit<u32> {
        crate::Limit::Unset
    }

    fn grp_tres_minutes<T>(_: Option<T>) -> crate::Tres {
        crate::Tres::default()
    }
}

#[cfg(feature = "v0_0_42")]
pub(super) mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type AccountsResp = t::V0042OpenapiAccountsResp;
    type UsersResp = t::V0042OpenapiUsersResp;
    type AssocsResp = t::V0042OpenapiAssocsResp;
    type QosResp = t::V0042OpenapiSlurmdbdQosResp;
    type ClustersResp = t::V0042OpenapiClustersResp;
    type TresResp = t::V0042OpenapiTresResp;
    type WckeyResp = t::V0042OpenapiWckeyResp;
    type JobsResp = t::V0042OpenapiSlurmdbdJobsResp;
    type PlainResp = t::V0042OpenapiResp;
    accounting_version!();
    accounting_v42_on!(t::V0042QosLimitsMaxJobs, t::V0042QosLimitsMaxTresMinutes);
}

#[cfg(feature = "v0_0_43")]
pub(super) mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type AccountsResp = t::V0043OpenapiAccountsResp;
    type UsersResp = t::V0043OpenapiUsersResp;
    type AssocsResp = t::V0043OpenapiAssocsResp;
    type QosResp = t::V0043OpenapiSlurmdbdQosResp;
    type ClustersResp = t::V0043OpenapiClustersResp;
    type TresResp = t::V0043OpenapiTresResp;
    type WckeyResp = t::V0043OpenapiWckeyResp;
    type JobsResp = t::V0043OpenapiSlurmdbdJobsResp;
    type PlainResp = t::V0043OpenapiResp;
    accounting_version!();
    accounting_v42_on!(t::V0043QosLimitsMaxJobs, t::V0043QosLimitsMaxTresMinutes);
}

#[cfg(feature = "v0_0_44")]
pub(super) mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type AccountsResp = t::V0044OpenapiAccountsResp;
    type UsersResp = t::V0044OpenapiUsersResp;
    type AssocsResp = t::V0044OpenapiAssocsResp;
    type QosResp = t::V0044OpenapiSlurmdbdQosResp;
    type ClustersResp = t::V0044OpenapiClustersResp;
    type TresResp = t::V0044OpenapiTresResp;
    type WckeyResp = t::V0044OpenapiWckeyResp;
    type JobsResp = t::V0044OpenapiSlurmdbdJobsResp;
    type PlainResp = t::V0044OpenapiResp;
    accounting_version!();
    accounting_v42_on!(t::V0044QosLimitsMaxJobs, t::V0044QosLimitsMaxTresMinutes);
}

#[cfg(feature = "v0_0_45")]
pub(super) mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type AccountsResp = t::V0045OpenapiAccountsResp;
    type UsersResp = t::V0045OpenapiUsersResp;
    type AssocsResp = t::V0045OpenapiAssocsResp;
    type QosResp = t::V0045OpenapiSlurmdbdQosResp;
    type ClustersResp = t::V0045OpenapiClustersResp;
    type TresResp = t::V0045OpenapiTresResp;
    type WckeyResp = t::V0045OpenapiWckeyResp;
    type JobsResp = t::V0045OpenapiSlurmdbdJobsResp;
    type PlainResp = t::V0045OpenapiResp;
    accounting_version!();
    accounting_v42_on!(t::V0045QosLimitsMaxJobs, t::V0045QosLimitsMaxTresMinutes);
}
