//! The tree of a project image, built FROM scratch: the static binary and the few files a program expects
//! (CA bundle, the `nonroot` user, name-service order, a writable /tmp), and nothing else: no shell, no
//! libc, no package database. Also the digest that names a tree's content, for the layer cache.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::compile::Binary;

use anyhow::{Context, Result};

/// The user the images run as: distroless's `nonroot`, which Kubernetes manifests commonly expect.
pub const USER: u32 = 65532;

const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
                      nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n";
/// The static binaries resolve names with glibc's built-in `files` and `dns` (no NSS modules to load:
/// checked with strace, /etc/hosts then DNS, glibc 2.36). That is also glibc's order without this file;
/// written out so that it does not depend on the glibc the binaries were linked with.
const NSSWITCH: &str = "passwd: files\ngroup: files\nhosts: files dns\n";

/// Makes `dir` (emptied first) the tree of the image of `binary`: (path, mode) as listed by `layout`.
/// A dynamic (dev) binary's libraries go in at the paths it loads them from.
pub fn assemble(dir: &Path, name: &str, binary: &Binary, ca_bundle: &[u8]) -> Result<()> {
    if dir.symlink_metadata().is_ok() {
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let read = |path: &Path| fs::read(path).with_context(|| format!("reading {}", path.display()));
    let binary_bytes = read(&binary.path)?;
    for (path, mode) in layout(name, &binary.libs) {
        let target = dir.join(&path);
        let lib = binary
            .libs
            .iter()
            .find(|l| l.strip_prefix("/").ok() == Some(Path::new(&path)));
        let content: Option<Vec<u8>> = match path.as_str() {
            p if p.ends_with('/') => None,
            p if p == super::certs::BUNDLE_PATH => Some(ca_bundle.to_vec()),
            "etc/passwd" => Some(PASSWD.as_bytes().to_vec()),
            "etc/group" => Some(GROUP.as_bytes().to_vec()),
            "etc/nsswitch.conf" => Some(NSSWITCH.as_bytes().to_vec()),
            _ => match lib {
                Some(lib) => Some(read(lib)?),
                None => Some(binary_bytes.clone()),
            },
        };
        match content {
            None => fs::create_dir_all(&target),
            Some(bytes) => fs::write(&target, bytes),
        }
        .with_context(|| format!("creating {}", target.display()))?;
        // Explicitly, so that the umask of whoever builds does not reach the image.
        fs::set_permissions(&target, fs::Permissions::from_mode(mode))?;
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Every entry of the tree, parents first; directories end in `/`.
pub fn layout(name: &str, libs: &[PathBuf]) -> Vec<(String, u32)> {
    let mut entries: Vec<(String, u32)> = [
        ("etc/", 0o755),
        ("etc/group", 0o644),
        ("etc/nsswitch.conf", 0o644),
        ("etc/passwd", 0o644),
        ("etc/ssl/", 0o755),
        ("etc/ssl/certs/", 0o755),
        (super::certs::BUNDLE_PATH, 0o644),
        ("tmp/", 0o1777),
        ("usr/", 0o755),
        ("usr/local/", 0o755),
        ("usr/local/bin/", 0o755),
    ]
    .into_iter()
    .map(|(p, m)| (p.to_owned(), m))
    .collect();
    entries.push((format!("usr/local/bin/{name}"), 0o755));
    for lib in libs {
        let relative = lib.strip_prefix("/").unwrap_or(lib);
        for parent in relative
            .ancestors()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            let dir = format!("{}/", parent.display());
            if dir != "/" && !entries.iter().any(|(p, _)| *p == dir) {
                entries.push((dir, 0o755));
            }
        }
        entries.push((relative.display().to_string(), 0o755));
    }
    entries
}

/// `sha256:…` of everything in `dir` that reaches a layer: each entry's path, type, mode, owner and
/// content (or link target), in the layer's order. Mtimes are left out: the layer sets them all to its epoch.
pub fn tree_digest(dir: &Path) -> Result<String> {
    let mut hasher = oci_image::HashingWriter::new(std::io::sink());
    hash_dir(dir, Path::new(""), &mut hasher)?;
    Ok(hasher.finish().1)
}

fn hash_dir(
    dir: &Path,
    rel: &Path,
    out: &mut oci_image::HashingWriter<std::io::Sink>,
) -> Result<()> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let rel = rel.join(&name);
        let meta = fs::symlink_metadata(&path)?;
        let kind = meta.file_type();
        let tag = if kind.is_dir() {
            'd'
        } else if kind.is_symlink() {
            'l'
        } else {
            'f'
        };
        write!(
            out,
            "{}\0{tag}\0{:o}\0{}\0{}\0{}\0",
            rel.display(),
            meta.mode() & 0o7777,
            meta.uid(),
            meta.gid(),
            meta.len()
        )?;
        if kind.is_dir() {
            hash_dir(&path, &rel, out)?;
        } else if kind.is_symlink() {
            write!(out, "{}\0", fs::read_link(&path)?.display())?;
        } else if kind.is_file() {
            let mut file = fs::File::open(&path)?;
            std::io::copy(&mut file, out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-scratch-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn static_binary(path: &Path) -> Binary {
        Binary {
            path: path.to_path_buf(),
            libs: Vec::new(),
        }
    }

    #[test]
    fn a_dynamic_binary_brings_its_libraries_at_their_paths() {
        let work = temp("libs");
        let binary = work.join("slurm");
        fs::write(&binary, b"dynamic").unwrap();
        let lib = work.join("lib64/ld-linux-x86-64.so.2");
        fs::create_dir_all(lib.parent().unwrap()).unwrap();
        fs::write(&lib, b"loader").unwrap();
        let tree = work.join("tree");
        let dev = Binary {
            path: binary,
            libs: vec![lib.clone()],
        };
        assemble(&tree, "slurm", &dev, b"ca").unwrap();
        let inside = tree.join(lib.strip_prefix("/").unwrap());
        assert_eq!(fs::read(&inside).unwrap(), b"loader");
        assert_eq!(
            fs::read(tree.join("usr/local/bin/slurm")).unwrap(),
            b"dynamic"
        );
        let entries = layout("slurm", &dev.libs);
        let lib_dir = format!(
            "{}/",
            inside
                .parent()
                .unwrap()
                .strip_prefix(&tree)
                .unwrap()
                .display()
        );
        let at = |p: &str| entries.iter().position(|(e, _)| e == p).unwrap();
        assert!(at(&lib_dir) < at(lib.strip_prefix("/").unwrap().to_str().unwrap()));
        fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn tree_has_the_binary_certificates_users_and_tmp() {
        let work = temp("tree");
        let binary = work.join("slurm-exporter");
        fs::write(&binary, b"\x7fELF static").unwrap();
        let tree = work.join("tree");
        assemble(
            &tree,
            "slurm-exporter",
            &static_binary(&binary),
            b"-----BEGIN CERTIFICATE-----\n",
        )
        .unwrap();

        let mode = |p: &str| fs::symlink_metadata(tree.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("usr/local/bin/slurm-exporter"), 0o755);
        assert_eq!(mode("tmp"), 0o1777);
        assert_eq!(mode("etc/ssl/certs/ca-certificates.crt"), 0o644);
        assert_eq!(
            fs::read(tree.join("usr/local/bin/slurm-exporter")).unwrap(),
            b"\x7fELF static"
        );
        let passwd = fs::read_to_string(tree.join("etc/passwd")).unwrap();
        assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");
        let group = fs::read_to_string(tree.join("etc/group")).unwrap();
        assert!(group.contains("nonroot:x:65532:"), "{group}");
        assert_eq!(fs::read_dir(tree.join("tmp")).unwrap().count(), 0);

        // Exactly the layout, nothing more: no shell, no libraries.
        let mut found = Vec::new();
        let mut stack = vec![tree.clone()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let mut rel = path.strip_prefix(&tree).unwrap().display().to_string();
                if path.is_dir() {
                    rel.push('/');
                    stack.push(path);
                }
                found.push(rel);
            }
        }
        found.sort();
        let mut expected: Vec<_> = layout("slurm-exporter", &[])
            .into_iter()
            .map(|e| e.0)
            .collect();
        expected.sort();
        assert_eq!(found, expected);
        fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn digest_follows_content_and_modes_not_mtimes() {
        let work = temp("digest");
        let binary = work.join("slurm");
        fs::write(&binary, b"one").unwrap();
        let tree = work.join("tree");
        assemble(&tree, "slurm", &static_binary(&binary), b"ca").unwrap();
        let first = tree_digest(&tree).unwrap();

        // Assembled again later: other mtimes, same digest.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assemble(&tree, "slurm", &static_binary(&binary), b"ca").unwrap();
        assert_eq!(tree_digest(&tree).unwrap(), first);

        fs::write(&binary, b"two").unwrap();
        assemble(&tree, "slurm", &static_binary(&binary), b"ca").unwrap();
        let other_binary = tree_digest(&tree).unwrap();
        assert_ne!(other_binary, first);

        fs::set_permissions(tree.join("tmp"), fs::Permissions::from_mode(0o755)).unwrap();
        assert_ne!(tree_digest(&tree).unwrap(), other_binary);
        fs::remove_dir_all(&work).unwrap();
    }
}
