//! Entry points for `benches/`: the client's own decoding code, without HTTP. Not part of
//! the API (hidden from the docs, may change at any time).

use std::any::Any;

use crate::model::{JobList, JobQuery};
use crate::{ApiVersion, Error, Response};

/// What [`Client::list_jobs`](crate::Client::list_jobs) does with a 2xx `GET /slurm/vX/jobs/`
/// answer once it has arrived: one decode of the body into the version's generated type
/// together with `errors[]`/`warnings[]`/`meta`, classification, and the conversion into the
/// version-neutral [`JobList`] (filtered by the default query).
pub fn decode_jobs(version: ApiVersion, body: Vec<u8>) -> Result<Response<JobList>, Error> {
    crate::ops::listing_from_body(version, &JobQuery::new(), body)
}

/// Just the decoding step of [`decode_jobs`], stopping at the version's generated types:
/// the answer `V004xOpenapiJobInfoResp` and its jobs, decoded on several threads when the
/// body is large, as `list_jobs` does (boxed, so that this function is the same for every
/// version).
pub fn decode_jobs_generated(
    version: ApiVersion,
    body: Vec<u8>,
) -> Result<Response<Box<dyn Any>>, Error> {
    generated(version, body, false)
}

/// [`decode_jobs_generated`] on one thread: the whole body in one pass, as for any other
/// answer (and as for a listing that is small or not pretty-printed).
pub fn decode_jobs_generated_whole(
    version: ApiVersion,
    body: Vec<u8>,
) -> Result<Response<Box<dyn Any>>, Error> {
    generated(version, body, true)
}

fn generated(
    version: ApiVersion,
    body: Vec<u8>,
    whole: bool,
) -> Result<Response<Box<dyn Any>>, Error> {
    fn read<R, I>(
        version: ApiVersion,
        body: Vec<u8>,
        whole: bool,
        take: fn(&mut R) -> Vec<I>,
    ) -> Result<Response<Box<dyn Any>>, Error>
    where
        R: serde::de::DeserializeOwned + 'static,
        I: serde::de::DeserializeOwned + Send + 'static,
    {
        let (method, path) = (&crate::Method::GET, format!("/slurm/{version}/jobs/"));
        if whole {
            let reply = crate::transport::read_answer::<R>(method, &path, 200, body)?;
            return Ok(Response::from(reply).map(|v| Box::new(v) as Box<dyn Any>));
        }
        let (reply, jobs) =
            crate::parallel::read_listing(method, &path, 200, body, "jobs", take, |job: I| job)?;
        Ok(Response::from(reply).map(|v| Box::new((v, jobs)) as Box<dyn Any>))
    }
    use crate::generated as g;
    macro_rules! version {
        ($m:ident, $resp:ident, $item:ident) => {
            read::<g::$m::types::$resp, g::$m::types::$item>(version, body, whole, |r| {
                r.jobs.take().map(Vec::from).unwrap_or_default()
            })
        };
    }
    #[allow(unreachable_patterns)]
    match version {
        #[cfg(feature = "v0_0_40")]
        ApiVersion::V0_0_40 => version!(v0_0_40, V0040OpenapiJobInfoResp, V0040JobInfo),
        #[cfg(feature = "v0_0_41")]
        ApiVersion::V0_0_41 => version!(
            v0_0_41,
            V0041OpenapiJobInfoResp,
            V0041OpenapiJobInfoRespJobsItem
        ),
        #[cfg(feature = "v0_0_42")]
        ApiVersion::V0_0_42 => version!(v0_0_42, V0042OpenapiJobInfoResp, V0042JobInfo),
        #[cfg(feature = "v0_0_43")]
        ApiVersion::V0_0_43 => version!(v0_0_43, V0043OpenapiJobInfoResp, V0043JobInfo),
        #[cfg(feature = "v0_0_44")]
        ApiVersion::V0_0_44 => version!(v0_0_44, V0044OpenapiJobInfoResp, V0044JobInfo),
        #[cfg(feature = "v0_0_45")]
        ApiVersion::V0_0_45 => version!(v0_0_45, V0045OpenapiJobInfoResp, V0045JobInfo),
        other => Err(Error::unsupported("job listing", other, None)),
    }
}

/// How many threads decode a large listing answer on this machine.
pub fn decode_threads() -> usize {
    crate::parallel::threads()
}
