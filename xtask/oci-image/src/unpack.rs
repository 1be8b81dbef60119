//! Applying layer tars to a directory, with OCI whiteouts (`.wh.<name>` deletes `<name>` from the layers
//! below, `.wh..wh..opq` empties its directory of what the layers below put there).

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, IoContext, Result};

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// Applies one layer to `dest`. `open` gives a fresh reader of the (uncompressed) layer tar each time it is
/// called: whiteouts are applied in a first pass, so that an opaque directory keeps what this same layer
/// puts in it whatever the order of the entries.
pub fn apply_layer<R: Read>(dest: &Path, mut open: impl FnMut() -> Result<R>) -> Result<()> {
    let mut archive = tar::Archive::new(open()?);
    for entry in archive.entries().ctx("reading layer entries for", dest)? {
        let entry = entry.ctx("reading a layer entry for", dest)?;
        let path = entry
            .path()
            .ctx("reading an entry path for", dest)?
            .into_owned();
        let Some(name) = path.file_name().and_then(OsStr::to_str) else {
            continue;
        };
        if name == OPAQUE {
            let dir = safe_join(dest, path.parent().unwrap_or(Path::new("")))?;
            if let Ok(children) = fs::read_dir(&dir) {
                for child in children {
                    let child = child.ctx("reading directory", &dir)?;
                    remove(&child.path())?;
                }
            }
        } else if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
            let target = safe_join(dest, &path.with_file_name(hidden))?;
            remove(&target)?;
        }
    }

    let mut archive = tar::Archive::new(open()?);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    archive.set_unpack_xattrs(false);
    for entry in archive.entries().ctx("reading layer entries for", dest)? {
        let mut entry = entry.ctx("reading a layer entry for", dest)?;
        let path = entry
            .path()
            .ctx("reading an entry path for", dest)?
            .into_owned();
        if path
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| n.starts_with(WHITEOUT_PREFIX))
        {
            continue;
        }
        let target = safe_join(dest, &path)?;
        let is_dir = entry.header().entry_type().is_dir();
        // A lower layer may hold a directory where this one has a file, or the other way round.
        if fs::symlink_metadata(&target).is_ok_and(|meta| meta.is_dir() != is_dir) {
            remove(&target)?;
        }
        entry.unpack_in(dest).ctx("unpacking", &target)?;
    }
    Ok(())
}

/// `dest/rel`, refusing absolute paths and `..`.
fn safe_join(dest: &Path, rel: &Path) -> Result<PathBuf> {
    let mut out = dest.to_owned();
    for component in rel.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return Err(Error::UnsafePath(rel.display().to_string())),
        }
    }
    Ok(out)
}

fn remove(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path).ctx("removing", path),
        Ok(_) => fs::remove_file(path).ctx("removing", path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).ctx("reading metadata of", path),
    }
}
