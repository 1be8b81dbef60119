//! A directory tree as one deterministic, uncompressed layer tar.
//!
//! Entries are sorted by name and every mtime is the given epoch; ownership, modes (with setuid/setgid/sticky),
//! symlinks and hardlinks are kept. Device nodes, FIFOs and sockets are left out (a runtime provides /dev),
//! and so are extended attributes (file capabilities), which no image here needs.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tar::{EntryType, Header};

use crate::error::{IoContext, Result};

/// Writes `root` as a layer tar to `out`. `epoch` is the mtime of every entry.
pub fn write_tree<W: Write>(root: &Path, epoch: i64, out: W) -> Result<W> {
    let mut writer = TreeWriter {
        builder: tar::Builder::new(out),
        epoch: u64::try_from(epoch).unwrap_or(0),
        links: HashMap::new(),
    };
    writer.dir(root, Path::new(""))?;
    writer
        .builder
        .into_inner()
        .ctx("finishing the layer of", root)
}

struct TreeWriter<W: Write> {
    builder: tar::Builder<W>,
    epoch: u64,
    /// (device, inode) of files with several links → the first path written, for hardlink entries.
    links: HashMap<(u64, u64), PathBuf>,
}

impl<W: Write> TreeWriter<W> {
    fn dir(&mut self, dir: &Path, rel: &Path) -> Result<()> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .ctx("reading directory", dir)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .ctx("reading directory", dir)?;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let rel = rel.join(&name);
            let meta = fs::symlink_metadata(&path).ctx("reading metadata of", &path)?;
            self.entry(&path, &rel, &meta)?;
            if meta.is_dir() {
                self.dir(&path, &rel)?;
            }
        }
        Ok(())
    }

    fn entry(&mut self, path: &Path, rel: &Path, meta: &fs::Metadata) -> Result<()> {
        let kind = meta.file_type();
        let mut header = Header::new_gnu();
        header.set_mode(meta.mode() & 0o7777);
        header.set_uid(u64::from(meta.uid()));
        header.set_gid(u64::from(meta.gid()));
        header.set_mtime(self.epoch);
        header.set_size(0);
        let written = if kind.is_dir() {
            header.set_entry_type(EntryType::Directory);
            let mut name = rel.as_os_str().to_owned();
            name.push("/");
            self.builder
                .append_data(&mut header, Path::new(&name), std::io::empty())
        } else if kind.is_symlink() {
            let target = fs::read_link(path).ctx("reading symlink", path)?;
            header.set_entry_type(EntryType::Symlink);
            self.builder.append_link(&mut header, rel, target)
        } else if kind.is_file() {
            if meta.nlink() > 1 {
                let key = (meta.dev(), meta.ino());
                if let Some(first) = self.links.get(&key).cloned() {
                    header.set_entry_type(EntryType::Link);
                    return self
                        .builder
                        .append_link(&mut header, rel, first)
                        .ctx("adding to the layer", path);
                }
                self.links.insert(key, rel.to_owned());
            }
            header.set_entry_type(EntryType::Regular);
            header.set_size(meta.len());
            let file = fs::File::open(path).ctx("opening", path)?;
            self.builder.append_data(&mut header, rel, file)
        } else {
            return Ok(());
        };
        written.ctx("adding to the layer", path)
    }
}
