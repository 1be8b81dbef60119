//! One image as a single tar that both `podman load` and `docker load` accept: an OCI image layout with
//! one manifest in its index (podman names the image after its `ref.name` and refuses several), plus a
//! Docker-style `manifest.json` that lists every name as a `RepoTags` entry.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;
use tar::{EntryType, Header};

use crate::error::{IoContext, Result};
use crate::spec::{ANNOTATION_REF_NAME, Index};
use crate::store::{Image, Store, to_json};

#[derive(Serialize)]
struct DockerManifest<'a> {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "RepoTags")]
    repo_tags: &'a [String],
    #[serde(rename = "Layers")]
    layers: Vec<String>,
}

/// Writes `image` to `out` under `names` (the first is the one podman uses). `epoch` is every entry's mtime.
pub fn write_archive(
    store: &Store,
    image: &Image,
    names: &[String],
    epoch: i64,
    out: &Path,
) -> Result<()> {
    let tmp = out.with_extension("tar.partial");
    let file = fs::File::create(&tmp).ctx("creating", &tmp)?;
    let mut tar = tar::Builder::new(BufWriter::with_capacity(1 << 20, file));
    let mtime = u64::try_from(epoch).unwrap_or(0);

    let mut entry = image.descriptor.clone();
    entry.annotations.clear();
    if let Some(first) = names.first() {
        entry
            .annotations
            .insert(ANNOTATION_REF_NAME.to_owned(), first.clone());
    }
    let index = Index {
        manifests: vec![entry],
        ..Index::default()
    };
    let blob_name = |digest: &str| format!("blobs/sha256/{}", &digest["sha256:".len()..]);
    let docker = [DockerManifest {
        config: blob_name(&image.manifest.config.digest),
        repo_tags: names,
        layers: image
            .manifest
            .layers
            .iter()
            .map(|l| blob_name(&l.digest))
            .collect(),
    }];

    let small = |tar: &mut tar::Builder<_>, name: &str, bytes: &[u8]| {
        let mut header = header(EntryType::Regular, 0o644, mtime);
        header.set_size(bytes.len() as u64);
        tar.append_data(&mut header, name, bytes)
    };
    let dir = |tar: &mut tar::Builder<_>, name: &str| {
        let mut header = header(EntryType::Directory, 0o755, mtime);
        tar.append_data(&mut header, name, std::io::empty())
    };
    (|| -> std::io::Result<()> {
        dir(&mut tar, "blobs/")?;
        dir(&mut tar, "blobs/sha256/")?;
        let mut blobs: Vec<&str> = vec![image.digest(), &image.manifest.config.digest];
        blobs.extend(image.manifest.layers.iter().map(|l| l.digest.as_str()));
        blobs.sort();
        blobs.dedup();
        for digest in blobs {
            let path = store.blob_path(digest).map_err(std::io::Error::other)?;
            let file = fs::File::open(&path)?;
            let mut header = header(EntryType::Regular, 0o644, mtime);
            header.set_size(file.metadata()?.len());
            tar.append_data(&mut header, blob_name(digest), file)?;
        }
        small(&mut tar, "index.json", &to_json(&index))?;
        small(&mut tar, "manifest.json", &to_json(&docker))?;
        small(&mut tar, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        let mut buf = tar.into_inner()?;
        buf.flush()?;
        buf.into_inner().map_err(|e| e.into_error())?.sync_all()
    })()
    .ctx("writing", &tmp)?;
    fs::rename(&tmp, out).ctx("renaming into", out)
}

fn header(kind: EntryType, mode: u32, mtime: u64) -> Header {
    let mut header = Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_mtime(mtime);
    header.set_size(0);
    header
}
