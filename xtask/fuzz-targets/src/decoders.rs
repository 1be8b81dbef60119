//! slurm-client's decoders of slurmrestd listings: the job and node listings of every REST
//! version (the first byte picks the version), and the streaming splitter (the first byte
//! picks where the body is cut into chunks).

use slurm_client::__fuzz;
use slurm_client::ApiVersion;

/// The versions this build decodes (slurm-client's default features, at least).
fn version(selector: u8) -> ApiVersion {
    const VERSIONS: &[ApiVersion] = &[
        ApiVersion::V0_0_42,
        ApiVersion::V0_0_43,
        ApiVersion::V0_0_44,
        ApiVersion::V0_0_45,
    ];
    VERSIONS[usize::from(selector) % VERSIONS.len()]
}

/// A job listing body (after one selector byte) through `Client::list_jobs`'s decoding.
pub fn jobs_decode(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let _ = __fuzz::decode_jobs(version(selector), body.to_vec());
}

/// A node listing body (after one selector byte) through `Client::list_nodes`'s decoding.
pub fn nodes_decode(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let _ = __fuzz::decode_nodes(version(selector), body.to_vec());
}

/// A listing body cut into chunks of the selector byte's size (1 to 256 bytes) through the
/// streaming splitter; the splitter must give the same answer however the body is cut.
pub fn stream_split(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let chunks: Vec<&[u8]> = body.chunks(usize::from(selector) + 1).collect();
    let cut = __fuzz::split_listing("jobs", &chunks);
    let whole = __fuzz::split_listing("jobs", &[body]);
    assert_eq!(cut, whole, "the splitter's answer depends on the chunks");
}
