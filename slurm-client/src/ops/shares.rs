//! Fair-share information (`sshare`).

use crate::model::{Limit, Shares, SharesQuery};
use crate::{Client, Error, Request, Response};

impl Client {
    /// The fair-share tree (`GET /slurm/vX/shares`, like `sshare`), optionally only for
    /// some accounts or users. Needs accounting (slurmdbd).
    pub async fn shares(&self, query: &SharesQuery) -> Result<Response<Shares>, Error> {
        let version = self.version().await?;
        let mut request = Request::get(format!("/slurm/{version}/shares"));
        if !query.accounts.is_empty() {
            request = request.query("accounts", query.accounts.join(","));
        }
        if !query.users.is_empty() {
            request = request.query("users", query.users.join(","));
        }
        dispatch!(self, "fair-share query", shares(self, request))
    }
}

/// Slurm marks an association without usage by a level of `NO_VAL64` (26.05), bare `Infinity`
/// (24.11, v0.0.40/41) or `infinite: true` (24.11, v0.0.42); all three mean infinite. The root's
/// level is `NO_VAL` in v0.0.40/41 and unset later: not set.
pub(crate) fn level(raw: Limit<f64>) -> Limit<f64> {
    const NO_VAL: f64 = 4_294_967_294.0;
    const NO_VAL64: f64 = 18_446_744_073_709_551_614.0;
    match raw {
        Limit::Value(n) if n >= NO_VAL64 => Limit::Infinite,
        Limit::Value(n) if n == NO_VAL => Limit::Unset,
        other => other,
    }
}

/// Shared by every version; expects the aliases `SharesResp` and `ShareItem`.
/// `effective_usage` and the fair-share factor and level are plain numbers in v0.0.40/41 and `{set, infinite, number}` later,
/// hence [`reshape`](crate::ops::reshape) for those fields.
macro_rules! shares_version {
    () => {
        use crate::model::{Share, Shares, text};
        use crate::ops::{Flex, id32, reshape, strings};
        use crate::{Client, Error, Request, Response};

        pub(super) async fn shares(
            client: &Client,
            request: Request,
        ) -> Result<Response<Shares>, Error> {
            let response = client.request::<SharesResp>(request).await?;
            Ok(response.map(|r| {
                let msg = r.shares.unwrap_or_default();
                Shares {
                    total_shares: msg
                        .total_shares
                        .and_then(|n| u64::try_from(n).ok())
                        .unwrap_or_default(),
                    shares: msg
                        .shares
                        .map(Vec::<ShareItem>::from)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|s| {
                            let fairshare = s.fairshare.unwrap_or_default();
                            Share {
                                id: id32(s.id).unwrap_or_default(),
                                cluster: text(s.cluster),
                                name: s.name.unwrap_or_default(),
                                parent: text(s.parent),
                                partition: text(s.partition),
                                kind: strings(s.type_),
                                shares: noval!(s.shares).narrow(),
                                shares_normalized: noval!(s.shares_normalized),
                                usage: s
                                    .usage
                                    .and_then(|n| u64::try_from(n).ok())
                                    .unwrap_or_default(),
                                usage_normalized: noval!(s.usage_normalized),
                                effective_usage: reshape::<_, Flex>(&s.effective_usage).0,
                                fairshare_factor: reshape::<_, Flex>(&fairshare.factor).0,
                                fairshare_level: crate::ops::shares::level(
                                    reshape::<_, Flex>(&fairshare.level).0,
                                ),
                            }
                        })
                        .collect(),
                }
            }))
        }
    };
}

#[cfg(feature = "v0_0_40")]
mod v0_0_40 {
    use crate::v0_0_40::types as t;
    type SharesResp = t::V0040OpenapiSharesResp;
    type ShareItem = t::V0040AssocSharesObjWrap;
    shares_version!();
}

#[cfg(feature = "v0_0_41")]
mod v0_0_41 {
    use crate::v0_0_41::types as t;
    type SharesResp = t::V0041OpenapiSharesResp;
    type ShareItem = t::V0041OpenapiSharesRespSharesSharesItem;
    shares_version!();
}

#[cfg(feature = "v0_0_42")]
mod v0_0_42 {
    use crate::v0_0_42::types as t;
    type SharesResp = t::V0042OpenapiSharesResp;
    type ShareItem = t::V0042AssocSharesObjWrap;
    shares_version!();
}

#[cfg(feature = "v0_0_43")]
mod v0_0_43 {
    use crate::v0_0_43::types as t;
    type SharesResp = t::V0043OpenapiSharesResp;
    type ShareItem = t::V0043AssocSharesObjWrap;
    shares_version!();
}

#[cfg(feature = "v0_0_44")]
mod v0_0_44 {
    use crate::v0_0_44::types as t;
    type SharesResp = t::V0044OpenapiSharesResp;
    type ShareItem = t::V0044AssocSharesObjWrap;
    shares_version!();
}

#[cfg(feature = "v0_0_45")]
mod v0_0_45 {
    use crate::v0_0_45::types as t;
    type SharesResp = t::V0045OpenapiSharesResp;
    type ShareItem = t::V0045AssocSharesObjWrap;
    shares_version!();
}

#[cfg(test)]
mod tests {
    use super::level;
    use crate::model::Limit;

    #[test]
    fn level_sentinels_mean_infinite_or_unset() {
        assert_eq!(level(Limit::Value(1.8446744073709552e19)), Limit::Infinite);
        assert_eq!(level(Limit::Value(f64::MAX)), Limit::Infinite);
        assert_eq!(level(Limit::Value(4294967294.0)), Limit::Unset);
        assert_eq!(level(Limit::Value(0.5)), Limit::Value(0.5));
        assert_eq!(level(Limit::Infinite), Limit::Infinite);
    }
}
