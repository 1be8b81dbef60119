//! The project's own programs as images (`cargo xtask image project`): each one static binary FROM
//! scratch, named `ghcr.io/slurm-rs/<binary>:<crate version>` and after each `--tag`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use oci_image::{Empty, RuntimeConfig, Store};

use super::build::{self, Built, Spec};
use super::{certs, compile, scratch};
use crate::slurm::sh::run;

pub const REGISTRY: &str = "ghcr.io/slurm-rs";
/// The selector of all of them.
pub const SELECTOR: &str = "project";
/// The epoch outside git without SOURCE_DATE_EPOCH (2025-01-01T00:00:00Z): fixed, so still reproducible.
const FALLBACK_EPOCH: i64 = 1_735_689_600;

pub struct Project {
    /// The binary: also the image id (`cargo xtask image slurm-operator`), its archive's name and
    /// the last part of its image name.
    pub name: &'static str,
    pub package: &'static str,
    /// Cargo features the binary needs (`package/feature`).
    pub features: &'static [&'static str],
    /// The default arguments.
    pub cmd: &'static [&'static str],
    /// The ports its defaults listen on.
    pub ports: &'static [&'static str],
    /// Instead of the package's description.
    pub description: Option<&'static str>,
}

/// Metrics on 8080, health probes on 8081, admission webhooks on 9443 (the defaults of their flags).
const CONTROLLER_PORTS: &[&str] = &["8080/tcp", "8081/tcp", "9443/tcp"];

pub const ALL: [Project; 4] = [
    Project {
        name: "slurm-operator",
        package: "slurm-operator",
        features: &[],
        cmd: &["run"],
        ports: CONTROLLER_PORTS,
        description: None,
    },
    Project {
        name: "slurm-bridge",
        package: "slurm-bridge",
        features: &[],
        cmd: &[],
        ports: CONTROLLER_PORTS,
        description: None,
    },
    Project {
        name: "slurm-exporter",
        package: "slurm-exporter",
        features: &[],
        cmd: &[],
        ports: &["9341/tcp"],
        description: None,
    },
    Project {
        name: "slurm",
        package: "slurm-client",
        features: &["slurm-client/cli"],
        cmd: &[],
        ports: &[],
        description: Some(
            "The slurm command-line tool: Slurm's REST API from a shell, for every REST version slurmrestd serves",
        ),
    },
];

/// Splits `selectors` into the project images they name (`project`: all of them) and the others.
pub fn split(selectors: &[String]) -> (Vec<&'static Project>, Vec<String>) {
    let mut chosen: Vec<&'static Project> = Vec::new();
    let mut rest = Vec::new();
    for selector in selectors {
        let matched: Vec<_> = ALL
            .iter()
            .filter(|p| selector == SELECTOR || p.name == selector)
            .collect();
        if matched.is_empty() {
            rest.push(selector.clone());
        }
        for image in matched {
            if !chosen.iter().any(|c| c.name == image.name) {
                chosen.push(image);
            }
        }
    }
    (chosen, rest)
}

/// `--tag`: an OCI tag (letters, digits, `_`, `.`, `-`; at most 128; not starting with `.` or `-`).
pub fn parse_tag(tag: &str) -> Result<String, String> {
    let valid = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    valid
        .then(|| tag.to_owned())
        .ok_or_else(|| format!("{tag:?} is not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})"))
}

/// `ghcr.io/slurm-rs/NAME:VERSION`, then one name per extra tag.
pub fn names(image: &Project, version: &str, tags: &[String]) -> Vec<String> {
    let mut names = vec![format!("{REGISTRY}/{}:{version}", image.name)];
    for tag in tags {
        let name = format!("{REGISTRY}/{}:{tag}", image.name);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// What the workspace's manifests say of a package.
pub struct Package {
    pub version: String,
    pub description: String,
    pub license: String,
}

pub fn packages(workspace: &Path) -> Result<BTreeMap<String, Package>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = run(Command::new(cargo).current_dir(workspace).args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
    ]))?;
    let metadata: serde_json::Value = serde_json::from_str(&out).context("cargo metadata")?;
    let field = |p: &serde_json::Value, k: &str| p[k].as_str().unwrap_or_default().to_owned();
    Ok(metadata["packages"]
        .as_array()
        .context("cargo metadata without packages")?
        .iter()
        .map(|p| {
            let package = Package {
                version: field(p, "version"),
                description: field(p, "description"),
                license: field(p, "license"),
            };
            (field(p, "name"), package)
        })
        .collect())
}

/// Every mtime and the `created` time: SOURCE_DATE_EPOCH, else the commit time of HEAD, else a constant.
fn epoch(workspace: &Path) -> Result<i64> {
    if let Ok(v) = std::env::var("SOURCE_DATE_EPOCH") {
        return v.parse().context("SOURCE_DATE_EPOCH is not a number");
    }
    Ok(Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["log", "-1", "--format=%ct"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(FALLBACK_EPOCH))
}

/// Builds `selected`'s binaries (one cargo run), then their images into `store` and `archives`.
pub fn build(
    workspace: &Path,
    selected: &[&Project],
    tags: &[String],
    dev: bool,
    store: &Store,
    archives: &Path,
    revision: &str,
) -> Result<Vec<Built>> {
    if selected.is_empty() {
        return Ok(Vec::new());
    }
    let packages = packages(workspace)?;
    let binaries = compile::build(workspace, &ALL, selected, dev)?;
    let bundle = certs::bundle()?;
    eprintln!(
        "  CA bundle: {} certificates from Debian ca-certificates {}",
        bundle.count, bundle.version
    );
    let epoch = epoch(workspace)?;
    let trees = super::work_dir().join("trees");
    let mut built = Vec::new();
    for (image, binary) in selected.iter().zip(&binaries) {
        let package = packages
            .get(image.package)
            .with_context(|| format!("no package {} in the workspace", image.package))?;
        let tree = trees.join(image.name);
        scratch::assemble(&tree, image.name, binary, &bundle.pem)?;
        let digest = scratch::tree_digest(&tree)?;
        // Dots cannot occur in a binary's name, so one image's prefix never matches another's records.
        let family = format!("project.{}.", image.name);
        let key = format!("{family}{}", &digest["sha256:".len()..][..16]);
        let names = names(image, &package.version, tags);
        built.push(build::store_image(
            &Spec {
                id: image.name,
                tree: &tree,
                layer_key: &key,
                stale_layers: Some(&family),
                epoch,
                config: runtime_config(image, package, epoch, revision),
                names: &names,
            },
            store,
            archives,
        )?);
    }
    Ok(built)
}

fn runtime_config(image: &Project, package: &Package, epoch: i64, revision: &str) -> RuntimeConfig {
    let mut labels = BTreeMap::new();
    let mut label = |k: &str, v: String| {
        labels.insert(format!("org.opencontainers.image.{k}"), v);
    };
    label("title", image.name.to_owned());
    label(
        "description",
        image
            .description
            .map_or_else(|| package.description.clone(), str::to_owned),
    );
    label("source", env!("CARGO_PKG_REPOSITORY").to_owned());
    label("version", package.version.clone());
    label("revision", revision.to_owned());
    label("licenses", package.license.clone());
    label("created", oci_image::spec::rfc3339(epoch));
    label("vendor", "slurm-rs".to_owned());
    let user = scratch::USER;
    RuntimeConfig {
        user: Some(format!("{user}:{user}")),
        exposed_ports: image
            .ports
            .iter()
            .map(|p| (p.to_string(), Empty {}))
            .collect(),
        env: vec![
            "PATH=/usr/local/bin".to_owned(),
            format!("SSL_CERT_FILE=/{}", certs::BUNDLE_PATH),
        ],
        entrypoint: vec![format!("/usr/local/bin/{}", image.name)],
        cmd: image.cmd.iter().map(|s| s.to_string()).collect(),
        labels,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_selects_all_four_and_names_pick_one() {
        let names = |s: &[&str]| {
            let s: Vec<String> = s.iter().map(|s| s.to_string()).collect();
            let (chosen, rest) = split(&s);
            (chosen.iter().map(|p| p.name).collect::<Vec<_>>(), rest)
        };
        assert_eq!(
            names(&["project"]).0,
            ["slurm-operator", "slurm-bridge", "slurm-exporter", "slurm"]
        );
        assert_eq!(
            names(&["slurm", "toolbox", "project"]),
            (
                vec!["slurm", "slurm-operator", "slurm-bridge", "slurm-exporter"],
                vec!["toolbox".to_owned()]
            )
        );
        assert_eq!(names(&["slurmd"]), (vec![], vec!["slurmd".to_owned()]));
    }

    #[test]
    fn names_carry_the_version_then_each_tag() {
        let tags = ["upgrade-1".to_owned(), "0.1.0".to_owned()];
        assert_eq!(
            names(&ALL[0], "0.1.0", &tags),
            [
                "ghcr.io/slurm-rs/slurm-operator:0.1.0",
                "ghcr.io/slurm-rs/slurm-operator:upgrade-1"
            ]
        );
        assert!(parse_tag("v2.0_rc-1").is_ok());
        for bad in ["", "-x", ".x", "a:b", "a/b", &"x".repeat(129)] {
            assert!(parse_tag(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn entrypoint_is_the_binary_and_the_user_is_nonroot() {
        let package = Package {
            version: "0.1.0".into(),
            description: "d".into(),
            license: "Apache-2.0".into(),
        };
        let config = runtime_config(&ALL[2], &package, 0, "abc");
        assert_eq!(config.entrypoint, ["/usr/local/bin/slurm-exporter"]);
        assert_eq!(config.user.as_deref(), Some("65532:65532"));
        assert!(config.exposed_ports.contains_key("9341/tcp"));
        assert_eq!(config.labels["org.opencontainers.image.version"], "0.1.0");
    }
}
