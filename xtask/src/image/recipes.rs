//! The images `cargo xtask image` builds: what goes into each root, how it starts, and its names.

use crate::slurm::Release;

/// What the image is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// `mmdebstrap --variant=minbase` of a Debian suite plus packages (without their Recommends).
    Minbase,
    /// Only the packages' files (`--variant=extract`): for busybox, which needs nothing else.
    Extract,
    /// Only the packages' files, as they are: a source of files for other images (the CA bundle of
    /// the project images), never an image itself.
    Files,
}

#[derive(Clone, Debug)]
pub struct Recipe {
    /// `slurmctld-26.05`, `mariadb`, …: what `cargo xtask image NAME` and the archive file are called.
    pub id: String,
    /// Recipes with the same root id share one root (and so one layer, stored once).
    pub root_id: String,
    pub component: &'static str,
    pub release: Option<Release>,
    pub suite: &'static str,
    pub base: Base,
    pub packages: Vec<&'static str>,
    /// The Debian package whose version becomes the image's version label.
    pub version_of: &'static str,
    /// Files added to the root: (path, mode, content).
    pub files: Vec<(&'static str, u32, &'static str)>,
    /// Directories emptied after installation (state that maintainer scripts created).
    pub clear: Vec<&'static str>,
    pub entrypoint: Vec<&'static str>,
    pub cmd: Vec<&'static str>,
    pub user: Option<&'static str>,
    pub ports: Vec<&'static str>,
    pub env: Vec<&'static str>,
    pub working_dir: Option<&'static str>,
    pub description: &'static str,
    pub licenses: &'static str,
    /// Every name the image is stored under; the first one names it in its archive (`podman load`).
    pub names: Vec<String>,
}

const SLURMCTLD_SH: &str = include_str!("entrypoints/slurmctld.sh");
const SLURMD_SH: &str = include_str!("entrypoints/slurmd.sh");
const LOGIN_SH: &str = include_str!("entrypoints/login.sh");
const MARIADB_SH: &str = include_str!("entrypoints/mariadb.sh");
const PAUSE_SH: &str = include_str!("entrypoints/pause.sh");

/// The Slurm images of one release share a root with all their packages: one mmdebstrap per release instead
/// of five, and one layer that the store and podman keep once. Measured on 2 cores: a root per image gave
/// 100–122 MB images and a 10–14 min cold build; the shared root gives 114 MB (26.05) and 126 MB (24.11)
/// images, both roots built in 80 s, and 240 MB of layers for the ten images instead of 1.1 GB.
const SLURM_PACKAGES: &[&str] = &[
    "slurmctld",
    "slurmd",
    "slurmrestd",
    "slurmdbd",
    "slurm-wlm-mysql-plugin",
    "sackd",
    "slurm-client",
    "openssh-server",
];

/// In every Slurm image: systemd-standalone-sysusers stands in for systemd, which the plugins accept as
/// an alternative; the JWT plugin because Slinky's slurm.conf names auth/jwt for every daemon.
const SLURM_COMMON: &[&str] = &[
    "slurm-wlm-basic-plugins",
    "slurm-wlm-jwt-plugin",
    "systemd-standalone-sysusers",
    "tini",
    "procps",
];

// Slurm is GPL-2.0-or-later with a permission to link OpenSSL, which has no SPDX identifier of its own.
const SLURM_LICENSE: &str = "GPL-2.0-or-later";
const TINI: [&str; 3] = ["/usr/bin/tini", "-g", "--"];

pub fn all() -> Vec<Recipe> {
    let mut out = Vec::new();
    for release in [Release::R26_05, Release::R24_11] {
        for component in ["slurmctld", "slurmd", "slurmrestd", "slurmdbd", "login"] {
            out.push(slurm(component, release));
        }
    }
    out.push(mariadb());
    out.push(toolbox());
    out
}

/// Slinky's tag for a release: the Ubuntu its images are built on.
fn slinky_tag(release: Release) -> &'static str {
    match release {
        Release::R24_11 => "24.11-ubuntu24.04",
        Release::R26_05 => "26.05-ubuntu26.04",
    }
}

fn slurm(component: &'static str, release: Release) -> Recipe {
    let mut packages = SLURM_COMMON.to_vec();
    packages.extend_from_slice(SLURM_PACKAGES);
    let files = vec![
        ("usr/local/bin/slurmctld-entrypoint.sh", 0o755, SLURMCTLD_SH),
        ("usr/local/bin/slurmd-entrypoint.sh", 0o755, SLURMD_SH),
        ("usr/local/bin/login-entrypoint.sh", 0o755, LOGIN_SH),
    ];
    let entry = |script: &'static str| {
        let mut e = TINI.to_vec();
        e.push(script);
        e
    };
    let (entrypoint, cmd, user, ports, description) = match component {
        "slurmctld" => (
            entry("/usr/local/bin/slurmctld-entrypoint.sh"),
            vec![],
            None,
            vec!["6817/tcp"],
            "Slurm controller (slurmctld -D; container args are slurmctld options)",
        ),
        "slurmd" => (
            entry("/usr/local/bin/slurmd-entrypoint.sh"),
            vec![],
            None,
            vec!["6818/tcp"],
            "Slurm compute node (slurmd -D; args such as -Z --conf-server HOST:PORT --conf '…')",
        ),
        "slurmrestd" => {
            let mut e = TINI.to_vec();
            e.push("slurmrestd");
            (
                e,
                vec!["0.0.0.0:6820"],
                // slurmrestd refuses to run as root or SlurmUser; Slinky's operator runs it as 65534.
                Some("65534:65534"),
                vec!["6820/tcp"],
                "Slurm REST API (slurmrestd; args are slurmrestd's, default 0.0.0.0:6820)",
            )
        }
        "slurmdbd" => {
            let mut e = TINI.to_vec();
            e.extend(["slurmdbd", "-D"]);
            (
                e,
                vec![],
                None,
                vec!["6819/tcp"],
                "Slurm accounting daemon (slurmdbd -D; args are slurmdbd options)",
            )
        }
        "login" => (
            entry("/usr/local/bin/login-entrypoint.sh"),
            vec![],
            None,
            vec!["22/tcp"],
            "Slurm login node (sackd with $SACKD_OPTIONS, sshd in the foreground)",
        ),
        other => unreachable!("no Slurm component {other}"),
    };
    let version_of = match component {
        "login" => "sackd",
        other => other,
    };
    Recipe {
        id: format!("{component}-{release}"),
        root_id: format!("slurm-{release}"),
        component,
        release: Some(release),
        suite: release.suite(),
        base: Base::Minbase,
        packages,
        version_of,
        files,
        clear: vec![],
        entrypoint,
        cmd,
        user,
        ports,
        env: vec![],
        working_dir: None,
        description,
        licenses: SLURM_LICENSE,
        names: vec![
            format!("ghcr.io/slinkyproject/{component}:{}", slinky_tag(release)),
            format!("localhost/slurm-dev/{component}:{release}"),
        ],
    }
}

fn mariadb() -> Recipe {
    Recipe {
        id: "mariadb".into(),
        root_id: "mariadb".into(),
        component: "mariadb",
        release: None,
        suite: "trixie",
        base: Base::Minbase,
        packages: vec!["mariadb-server", "tini"],
        version_of: "mariadb-server",
        files: vec![("usr/local/bin/mariadb-entrypoint.sh", 0o755, MARIADB_SH)],
        // The package's postinst initialises a data directory; the entrypoint makes one per container.
        clear: vec!["var/lib/mysql"],
        entrypoint: vec![
            "/usr/bin/tini",
            "-g",
            "--",
            "/usr/local/bin/mariadb-entrypoint.sh",
        ],
        cmd: vec!["mariadbd"],
        user: None,
        ports: vec!["3306/tcp"],
        env: vec![],
        working_dir: None,
        description: "MariaDB from Debian trixie, initialised from MARIADB_* variables like the official image",
        licenses: "GPL-2.0-only",
        names: vec![
            "localhost/slurm-dev/mariadb:11.8".into(),
            "localhost/slurm-dev/mariadb:latest".into(),
            "docker.io/library/mariadb:11.8".into(),
        ],
    }
}

fn toolbox() -> Recipe {
    Recipe {
        id: "toolbox".into(),
        root_id: "toolbox".into(),
        component: "toolbox",
        release: None,
        suite: "trixie",
        base: Base::Extract,
        packages: vec!["busybox-static"],
        version_of: "busybox-static",
        files: vec![("usr/local/bin/pause", 0o755, PAUSE_SH)],
        clear: vec![],
        entrypoint: vec![],
        cmd: vec!["/usr/local/bin/pause"],
        user: None,
        ports: vec![],
        env: vec![],
        working_dir: Some("/"),
        description: "busybox (sh, sleep, nc, wget, …) for test workloads; by default it sleeps until stopped",
        licenses: "GPL-2.0-only",
        // Also the stand-in for the alpine image Slinky's logfile sidecars use (sh, mkfifo, cat).
        names: vec![
            "localhost/slurm-dev/toolbox:latest".into(),
            "docker.io/library/busybox:latest".into(),
            "docker.io/library/alpine:latest".into(),
        ],
    }
}

/// The recipes `selectors` name: an id (`slurmd-26.05`), a component (`slurmd`: both releases), or a
/// release (`26.05`: all its Slurm images).
pub fn select(selectors: &[String]) -> anyhow::Result<Vec<Recipe>> {
    let all = all();
    let mut chosen: Vec<Recipe> = Vec::new();
    for selector in selectors {
        let matched: Vec<_> = all
            .iter()
            .filter(|r| {
                r.id == *selector
                    || r.component == selector
                    || r.release.is_some_and(|rel| rel.name() == selector)
            })
            .collect();
        if matched.is_empty() {
            anyhow::bail!(
                "no image {selector:?}: expected one of {}, a component name, a release, `project` or a \
                 project binary ({})",
                all.iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                super::project::ALL
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for recipe in matched {
            if !chosen.iter().any(|c| c.id == recipe.id) {
                chosen.push(recipe.clone());
            }
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_belongs_to_one_image() {
        let mut names: Vec<_> = all().into_iter().flat_map(|r| r.names).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count);
    }

    #[test]
    fn selectors_pick_ids_components_and_releases() {
        let ids = |s: &[&str]| -> Vec<String> {
            let s: Vec<String> = s.iter().map(|s| s.to_string()).collect();
            select(&s).unwrap().into_iter().map(|r| r.id).collect()
        };
        assert_eq!(ids(&["slurmd-24.11"]), ["slurmd-24.11"]);
        assert_eq!(
            ids(&["slurmd", "toolbox"]),
            ["slurmd-26.05", "slurmd-24.11", "toolbox"]
        );
        assert_eq!(ids(&["26.05"]).len(), 5);
        assert!(select(&["nope".to_owned()]).is_err());
    }

    #[test]
    fn slurm_images_of_a_release_share_their_root() {
        let roots: std::collections::BTreeSet<_> = all()
            .into_iter()
            .map(|r| (r.root_id, r.packages, r.files))
            .collect();
        assert_eq!(roots.len(), 4, "slurm-26.05, slurm-24.11, mariadb, toolbox");
    }
}
