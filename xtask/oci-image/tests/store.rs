use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use oci_image::{Error, RuntimeConfig, Store};

const EPOCH: i64 = 1_764_028_800;

/// A tree with what real roots contain: nested dirs, modes incl. setuid, symlinks, a hardlink, a long name.
fn sample_tree(dir: &Path) {
    let long = "d".repeat(120);
    fs::create_dir_all(dir.join("etc/slurm")).unwrap();
    fs::create_dir_all(dir.join("usr/bin")).unwrap();
    fs::create_dir_all(dir.join(&long).join("inner")).unwrap();
    fs::write(dir.join("etc/slurm/slurm.conf"), "ClusterName=x\n").unwrap();
    fs::write(dir.join("etc/secret"), "key").unwrap();
    fs::set_permissions(dir.join("etc/secret"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(dir.join("usr/bin/tool"), vec![7u8; 70_000]).unwrap();
    fs::set_permissions(dir.join("usr/bin/tool"), fs::Permissions::from_mode(0o4755)).unwrap();
    fs::hard_link(dir.join("usr/bin/tool"), dir.join("usr/bin/tool-alias")).unwrap();
    symlink("tool", dir.join("usr/bin/link")).unwrap();
    symlink(
        format!("/{}", "t".repeat(150)),
        dir.join("usr/bin/long-link"),
    )
    .unwrap();
    fs::write(dir.join(&long).join("inner").join("f".repeat(90)), "deep").unwrap();
    fs::write(dir.join("empty"), "").unwrap();
    fs::set_permissions(dir.join(&long), fs::Permissions::from_mode(0o1777)).unwrap();
    if nix_is_root() {
        std::os::unix::fs::lchown(dir.join("etc/slurm"), Some(401), Some(401)).unwrap();
        std::os::unix::fs::lchown(dir.join("usr/bin/link"), Some(401), Some(402)).unwrap();
    }
}

fn nix_is_root() -> bool {
    fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Everything the layer promises to keep, per path (directory mtimes change as children are created).
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    let mut inodes = BTreeMap::new();
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let kind = if meta.is_dir() {
                stack.push(path.clone());
                "dir".to_owned()
            } else if meta.file_type().is_symlink() {
                format!("link->{}", fs::read_link(&path).unwrap().display())
            } else {
                let first = inodes.entry(meta.ino()).or_insert_with(|| rel.clone());
                format!(
                    "file {:?} links {} first {}",
                    fs::read(&path).unwrap(),
                    meta.nlink(),
                    first
                )
            };
            let mtime = if meta.is_dir() { 0 } else { meta.mtime() };
            let mode = if meta.file_type().is_symlink() {
                0
            } else {
                meta.mode() & 0o7777
            };
            out.insert(
                rel,
                format!(
                    "{kind} mode {mode:o} {}:{} mtime {mtime}",
                    meta.uid(),
                    meta.gid()
                ),
            );
        }
    }
    out
}

fn image(store: &Store, tree: &Path) -> oci_image::Descriptor {
    let layer = store.add_layer(tree, EPOCH).unwrap();
    let config = RuntimeConfig {
        entrypoint: vec!["/usr/bin/tool".into()],
        cmd: vec!["--help".into()],
        env: vec!["PATH=/usr/bin".into()],
        user: Some("401:401".into()),
        ..Default::default()
    };
    store.add_image(&[layer], config, EPOCH, "test").unwrap()
}

#[test]
fn same_tree_gives_the_same_digest_twice() {
    let tmp = tempfile::tempdir().unwrap();
    sample_tree(&tmp.path().join("a"));
    let first = image(
        &Store::open(tmp.path().join("s1")).unwrap(),
        &tmp.path().join("a"),
    );
    // The same content written later (other mtimes, other inode order) into another store.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    sample_tree(&tmp.path().join("b"));
    let second = image(
        &Store::open(tmp.path().join("s2")).unwrap(),
        &tmp.path().join("b"),
    );
    assert_eq!(first.digest, second.digest);
    assert_eq!(
        fs::read(tmp.path().join("s1/blobs/sha256").join(&first.digest[7..])).unwrap(),
        fs::read(tmp.path().join("s2/blobs/sha256").join(&second.digest[7..])).unwrap()
    );
}

#[test]
fn unpacking_gives_back_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    sample_tree(&tree);
    let store = Store::open(tmp.path().join("store")).unwrap();
    let manifest = image(&store, &tree);
    store
        .tag(&manifest, &["localhost/test/tree:1".into()])
        .unwrap();
    let image = store.resolve("localhost/test/tree:1").unwrap();
    let out = tmp.path().join("out");
    store.unpack(&image, &out).unwrap();

    let mut expected = snapshot(&tree);
    // Layers fix every mtime to the epoch.
    for value in expected.values_mut() {
        if let Some((head, mtime)) = value.rsplit_once(" mtime ")
            && mtime != "0"
        {
            *value = format!("{head} mtime {EPOCH}");
        }
    }
    assert_eq!(snapshot(&out), expected);
    assert_eq!(image.config.config.user.as_deref(), Some("401:401"));
    assert_eq!(
        image.config.rootfs.diff_ids,
        vec![image.manifest.layers[0].digest.clone()]
    );
    store.verify_blob(&image.manifest.layers[0].digest).unwrap();
}

#[test]
fn references_resolve_by_name_alias_normalised_and_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    sample_tree(&tree);
    let store = Store::open(tmp.path().join("store")).unwrap();
    let manifest = image(&store, &tree);
    store
        .tag(
            &manifest,
            &[
                "ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04".into(),
                "localhost/slurm-dev/slurmctld:26.05".into(),
                "docker.io/library/alpine:latest".into(),
            ],
        )
        .unwrap();
    for reference in [
        "ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04",
        "localhost/slurm-dev/slurmctld:26.05",
        "alpine",
        "docker.io/library/alpine",
        &format!("alpine@{}", manifest.digest),
    ] {
        let found = store.resolve(reference).unwrap();
        assert_eq!(found.digest(), manifest.digest, "{reference}");
    }
    // Re-tagging a name moves it and leaves the others.
    let other = tmp.path().join("other");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("x"), "other").unwrap();
    let second = image(&store, &other);
    store
        .tag(&second, &["docker.io/library/alpine:latest".into()])
        .unwrap();
    assert_eq!(store.resolve("alpine").unwrap().digest(), second.digest);
    assert_eq!(
        store
            .resolve("localhost/slurm-dev/slurmctld:26.05")
            .unwrap()
            .digest(),
        manifest.digest
    );
    assert_eq!(store.names().unwrap().len(), 3);
    // Nothing unreferenced yet: both images are named.
    assert_eq!(store.remove_unreferenced_blobs().unwrap(), 0);
}

#[test]
fn a_missing_reference_is_named_in_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let err = store
        .resolve("ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04")
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }));
    let message = err.to_string();
    assert!(
        message.contains("\"ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04\" is not in the store"),
        "{message}"
    );
    assert!(message.contains("no images"), "{message}");
}

#[test]
fn whiteouts_delete_and_opaque_dirs_empty_lower_layers() {
    let tmp = tempfile::tempdir().unwrap();
    let lower = tmp.path().join("lower");
    fs::create_dir_all(lower.join("keep")).unwrap();
    fs::create_dir_all(lower.join("opaque/sub")).unwrap();
    fs::write(lower.join("gone"), "x").unwrap();
    fs::write(lower.join("keep/a"), "a").unwrap();
    fs::write(lower.join("opaque/old"), "old").unwrap();
    fs::write(lower.join("was-file"), "f").unwrap();

    // The upper layer, as another tool would write it: whiteout files after the entries they sit beside.
    let upper = tmp.path().join("upper");
    fs::create_dir_all(upper.join("opaque")).unwrap();
    fs::create_dir_all(upper.join("was-file")).unwrap();
    fs::write(upper.join("opaque/new"), "new").unwrap();
    fs::write(upper.join("opaque/.wh..wh..opq"), "").unwrap();
    fs::write(upper.join(".wh.gone"), "").unwrap();
    fs::write(upper.join("was-file/inside"), "i").unwrap();

    let store = Store::open(tmp.path().join("store")).unwrap();
    let layers = [
        store.add_layer(&lower, EPOCH).unwrap(),
        store.add_layer(&upper, EPOCH).unwrap(),
    ];
    let manifest = store
        .add_image(&layers, RuntimeConfig::default(), EPOCH, "test")
        .unwrap();
    store
        .tag(&manifest, &["localhost/test/layers:1".into()])
        .unwrap();
    let out = tmp.path().join("out");
    store
        .unpack(&store.resolve("localhost/test/layers:1").unwrap(), &out)
        .unwrap();

    assert!(!out.join("gone").exists());
    assert!(!out.join(".wh.gone").exists());
    assert_eq!(fs::read_to_string(out.join("keep/a")).unwrap(), "a");
    assert!(!out.join("opaque/old").exists());
    assert!(!out.join("opaque/sub").exists());
    assert_eq!(fs::read_to_string(out.join("opaque/new")).unwrap(), "new");
    assert_eq!(
        fs::read_to_string(out.join("was-file/inside")).unwrap(),
        "i"
    );
}

#[test]
fn archives_hold_one_manifest_and_all_names() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    sample_tree(&tree);
    let store = Store::open(tmp.path().join("store")).unwrap();
    let manifest = image(&store, &tree);
    let names = vec!["ghcr.io/x/y:1".to_owned(), "localhost/y:1".to_owned()];
    store.tag(&manifest, &names).unwrap();
    let image = store.resolve("localhost/y:1").unwrap();
    let out = tmp.path().join("y.oci.tar");
    oci_image::write_archive(&store, &image, &names, EPOCH, &out).unwrap();
    let first = fs::read(&out).unwrap();
    oci_image::write_archive(&store, &image, &names, EPOCH, &out).unwrap();
    assert_eq!(first, fs::read(&out).unwrap(), "archives are reproducible");

    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(&first[..]).entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut body).unwrap();
        files.insert(path, body);
    }
    let index: oci_image::Index = serde_json::from_slice(&files["index.json"]).unwrap();
    assert_eq!(index.manifests.len(), 1);
    assert_eq!(index.manifests[0].digest, manifest.digest);
    assert_eq!(index.manifests[0].ref_name(), Some("ghcr.io/x/y:1"));
    let docker: serde_json::Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
    assert_eq!(docker[0]["RepoTags"], serde_json::json!(names));
    assert!(files.contains_key(&format!("blobs/sha256/{}", &manifest.digest[7..])));
}
