//! Entry points for the fuzz targets (`xtask/fuzz-targets`): the client's parsers of
//! slurmrestd's answers, without HTTP. Not part of the API (hidden from the docs, may change
//! at any time), like `__bench`.

use crate::model::{JobList, JobQuery, NodeList};
use crate::stream::split::Split;
use crate::{ApiVersion, Error, Response};

/// What [`Client::list_jobs`](crate::Client::list_jobs) does with a 2xx job listing of
/// `version`: decoding (in parallel when large), classification, conversion.
pub fn decode_jobs(version: ApiVersion, body: Vec<u8>) -> Result<Response<JobList>, Error> {
    crate::ops::listing_from_body(version, &JobQuery::new(), body)
}

/// What [`Client::list_nodes`](crate::Client::list_nodes) does with a 2xx node listing of
/// `version`.
pub fn decode_nodes(version: ApiVersion, body: Vec<u8>) -> Result<Response<NodeList>, Error> {
    crate::ops::nodes_from_body(version, body)
}

/// What the streaming listings (`Client::for_each_job` and the like) do with a body arriving
/// in `chunks`: the splitter cuts out each element of the top-level array `key`, each is
/// decoded on its own (as JSON values here), and the rest is returned once the body ends.
/// Returns the number of elements and the rest, or the first error in words.
pub fn split_listing(key: &str, chunks: &[&[u8]]) -> Result<(usize, Vec<u8>), String> {
    let mut split = Split::new(key);
    let (mut index, mut failed) = (0, None);
    for chunk in chunks {
        split
            .feed(chunk, |bytes| {
                let decoded = crate::stream::item::decode_item::<serde_json::Value>(
                    &crate::Method::GET,
                    "/fuzz",
                    key,
                    index,
                    bytes,
                );
                if let (Err(e), None) = (decoded, &failed) {
                    failed = Some(e.to_string());
                }
                index += 1;
            })
            .map_err(|m| m.message)?;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let rest = split.finish().map_err(|m| m.message)?;
    Ok((index, rest))
}
