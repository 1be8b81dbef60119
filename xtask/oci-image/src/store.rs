//! An OCI image-layout directory (`oci-layout`, `index.json`, `blobs/sha256/…`) used as an image store:
//! images are found by the `org.opencontainers.image.ref.name` annotation of their index entries, and one
//! manifest may be listed under several names.

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::digest::{HashingWriter, hex_part, sha256, sha256_reader};
use crate::error::{Error, IoContext, Result};
use crate::reference::{Lookup, lookup};
use crate::spec::*;

const OCI_LAYOUT: &str = r#"{"imageLayoutVersion":"1.0.0"}"#;

/// An image found in a store.
#[derive(Clone, Debug)]
pub struct Image {
    /// The name it was found under.
    pub name: String,
    pub descriptor: Descriptor,
    pub manifest: Manifest,
    pub config: ImageConfigFile,
}

impl Image {
    pub fn digest(&self) -> &str {
        &self.descriptor.digest
    }

    /// Bytes of the config and all layers: what the image takes on disk, uncompressed.
    pub fn size(&self) -> u64 {
        self.manifest.config.size + self.manifest.layers.iter().map(|l| l.size).sum::<u64>()
    }
}

#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// Opens the store at `root`, creating an empty one if nothing is there.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store> {
        let root = root.into();
        let blobs = root.join("blobs").join("sha256");
        fs::create_dir_all(&blobs).ctx("creating", &blobs)?;
        let layout = root.join("oci-layout");
        if !layout.exists() {
            write_atomic(&layout, OCI_LAYOUT.as_bytes())?;
        }
        if !root.join("index.json").exists() {
            write_json_atomic(&root.join("index.json"), &Index::default())?;
        }
        Ok(Store { root })
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    pub fn blob_path(&self, digest: &str) -> Result<PathBuf> {
        let hex = hex_part(digest).ok_or_else(|| Error::Unsupported {
            what: "digest",
            value: digest.to_owned(),
        })?;
        Ok(self.root.join("blobs").join("sha256").join(hex))
    }

    pub fn has_blob(&self, digest: &str) -> bool {
        self.blob_path(digest).is_ok_and(|p| p.is_file())
    }

    /// Writes `tree` as an uncompressed layer blob whose entries all carry mtime `epoch`.
    pub fn add_layer(&self, tree: &Path, epoch: i64) -> Result<Descriptor> {
        let tmp = self.temp_path("layer");
        let file = fs::File::create(&tmp).ctx("creating", &tmp)?;
        let writer = HashingWriter::new(BufWriter::with_capacity(1 << 20, file));
        let written = crate::layer::write_tree(tree, epoch, writer).and_then(|w| {
            let (buf, digest, size) = w.finish();
            buf.into_inner()
                .map_err(|e| e.into_error())
                .and_then(|f| f.sync_all())
                .ctx("writing", &tmp)?;
            Ok((digest, size))
        });
        let (digest, size) = match written {
            Ok(v) => v,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let path = self.blob_path(&digest)?;
        fs::rename(&tmp, &path).ctx("storing", &path)?;
        Ok(descriptor(MEDIA_TYPE_LAYER, digest, size))
    }

    /// Stores `bytes` as a blob (idempotent: a blob is named by its content).
    pub fn add_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor> {
        let digest = sha256(bytes);
        let path = self.blob_path(&digest)?;
        if !path.is_file() {
            write_atomic(&path, bytes)?;
        }
        Ok(descriptor(media_type, digest, bytes.len() as u64))
    }

    /// Writes the config and manifest of an image made of `layers` (bottom first) and returns the
    /// manifest's descriptor. `epoch` becomes the `created` time, so equal inputs give equal digests.
    pub fn add_image(
        &self,
        layers: &[Descriptor],
        config: RuntimeConfig,
        epoch: i64,
        created_by: &str,
    ) -> Result<Descriptor> {
        let created = rfc3339(epoch);
        let config_file = ImageConfigFile {
            created: Some(created.clone()),
            architecture: "amd64".to_owned(),
            os: "linux".to_owned(),
            config,
            rootfs: RootFs {
                kind: "layers".to_owned(),
                diff_ids: layers.iter().map(|l| l.digest.clone()).collect(),
            },
            history: layers
                .iter()
                .map(|_| History {
                    created: Some(created.clone()),
                    created_by: Some(created_by.to_owned()),
                })
                .collect(),
        };
        let config = self.add_blob(MEDIA_TYPE_CONFIG, &to_json(&config_file))?;
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MEDIA_TYPE_MANIFEST.to_owned()),
            config,
            layers: layers.to_vec(),
            annotations: Default::default(),
        };
        self.add_blob(MEDIA_TYPE_MANIFEST, &to_json(&manifest))
    }

    pub fn index(&self) -> Result<Index> {
        read_json(&self.root.join("index.json"))
    }

    /// Lists `manifest` under each of `names`, replacing whatever those names pointed to before.
    pub fn tag(&self, manifest: &Descriptor, names: &[String]) -> Result<()> {
        let mut index = self.index()?;
        index
            .manifests
            .retain(|d| d.ref_name().is_none_or(|n| !names.iter().any(|m| m == n)));
        for name in names {
            let mut entry = manifest.clone();
            entry.annotations.clear();
            entry
                .annotations
                .insert(ANNOTATION_REF_NAME.to_owned(), name.clone());
            index.manifests.push(entry);
        }
        index.manifests.sort_by(|a, b| {
            a.ref_name()
                .cmp(&b.ref_name())
                .then(a.digest.cmp(&b.digest))
        });
        write_json_atomic(&self.root.join("index.json"), &index)
    }

    /// The names in the index, sorted.
    pub fn names(&self) -> Result<Vec<String>> {
        let index = self.index()?;
        let names: BTreeSet<_> = index
            .manifests
            .iter()
            .filter_map(|d| d.ref_name().map(str::to_owned))
            .collect();
        Ok(names.into_iter().collect())
    }

    /// Finds the image `reference` names: by its exact ref name, its normalised form
    /// (`busybox` = `docker.io/library/busybox:latest`), or a `name@sha256:…` digest.
    pub fn resolve(&self, reference: &str) -> Result<Image> {
        let index = self.index()?;
        let found = match lookup(reference)? {
            Lookup::Names(names) => names.iter().find_map(|name| {
                index
                    .manifests
                    .iter()
                    .find(|d| d.ref_name() == Some(name.as_str()))
                    .map(|d| (name.clone(), d.clone()))
            }),
            Lookup::Digest { digest, .. } => index
                .manifests
                .iter()
                .find(|d| d.digest == digest)
                .map(|d| (reference.to_owned(), d.clone())),
        };
        let Some((name, descriptor)) = found else {
            return Err(Error::NotFound {
                reference: reference.to_owned(),
                store: self.root.clone(),
                known: self.names()?,
            });
        };
        let manifest: Manifest = self.read_blob_json(&descriptor.digest)?;
        let config: ImageConfigFile = self.read_blob_json(&manifest.config.digest)?;
        Ok(Image {
            name,
            descriptor,
            manifest,
            config,
        })
    }

    fn read_blob_json<T: DeserializeOwned>(&self, digest: &str) -> Result<T> {
        let path = self.blob_path(digest)?;
        let bytes = fs::read(&path).ctx("reading", &path)?;
        let actual = sha256(&bytes);
        if actual != digest {
            return Err(Error::DigestMismatch {
                store: self.root.clone(),
                digest: digest.to_owned(),
                actual,
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| Error::Json { path, source })
    }

    /// Checks that a blob's content matches its digest (layers are large: only on request).
    pub fn verify_blob(&self, digest: &str) -> Result<()> {
        let path = self.blob_path(digest)?;
        let file = fs::File::open(&path).ctx("opening", &path)?;
        let actual = sha256_reader(BufReader::new(file)).ctx("reading", &path)?;
        if actual != digest {
            return Err(Error::DigestMismatch {
                store: self.root.clone(),
                digest: digest.to_owned(),
                actual,
            });
        }
        Ok(())
    }

    /// Unpacks the layers of `image`, bottom first, into `dest` (created if missing).
    pub fn unpack(&self, image: &Image, dest: &Path) -> Result<()> {
        fs::create_dir_all(dest).ctx("creating", dest)?;
        for layer in &image.manifest.layers {
            let path = self.blob_path(&layer.digest)?;
            let gzip = match layer.media_type.as_str() {
                MEDIA_TYPE_LAYER | DOCKER_MEDIA_TYPE_LAYER => false,
                MEDIA_TYPE_LAYER_GZIP | DOCKER_MEDIA_TYPE_LAYER_GZIP => true,
                other => {
                    return Err(Error::Unsupported {
                        what: "layer media type",
                        value: other.to_owned(),
                    });
                }
            };
            crate::unpack::apply_layer(dest, || {
                let file = BufReader::new(fs::File::open(&path).ctx("opening", &path)?);
                Ok(if gzip {
                    Box::new(flate2::read::GzDecoder::new(file)) as Box<dyn Read>
                } else {
                    Box::new(file)
                })
            })?;
        }
        Ok(())
    }

    /// Deletes blobs no manifest in the index refers to; returns the bytes freed.
    pub fn remove_unreferenced_blobs(&self) -> Result<u64> {
        let mut keep = BTreeSet::new();
        for entry in self.index()?.manifests {
            let manifest: Manifest = self.read_blob_json(&entry.digest)?;
            keep.insert(entry.digest);
            keep.insert(manifest.config.digest);
            keep.extend(manifest.layers.into_iter().map(|l| l.digest));
        }
        let dir = self.root.join("blobs").join("sha256");
        let mut freed = 0;
        for entry in fs::read_dir(&dir).ctx("reading directory", &dir)? {
            let entry = entry.ctx("reading directory", &dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let digest = format!("sha256:{name}");
            // Other names are blobs another process is still writing.
            if hex_part(&digest).is_some() && !keep.contains(&digest) {
                freed += entry.metadata().map(|m| m.len()).unwrap_or(0);
                fs::remove_file(entry.path()).ctx("removing", entry.path())?;
            }
        }
        Ok(freed)
    }

    fn temp_path(&self, what: &str) -> PathBuf {
        temp_sibling(&self.root.join("blobs").join("sha256").join(what))
    }
}

fn descriptor(media_type: &str, digest: String, size: u64) -> Descriptor {
    Descriptor {
        media_type: media_type.to_owned(),
        digest,
        size,
        annotations: Default::default(),
    }
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("OCI documents serialise")
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = fs::read(path).ctx("reading", path)?;
    serde_json::from_slice(&bytes).map_err(|source| Error::Json {
        path: path.to_owned(),
        source,
    })
}

fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    write_atomic(path, &to_json(value))
}

/// Writes through a temporary file and a rename, so readers never see half a file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temp_sibling(path);
    let mut file = fs::File::create(&tmp).ctx("creating", &tmp)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .ctx("writing", &tmp)?;
    fs::rename(&tmp, path).ctx("renaming into", path)
}

fn temp_sibling(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    path.with_file_name(name)
}
