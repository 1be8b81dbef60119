//! A Kubernetes container of a pod, turned into what the runtime starts.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Container, Pod};
use kube_ground::net::Sandbox;
use kube_ground::runtime::{ContainerSpec, Mount};

use super::env;
use super::hosts;
use super::volumes::{HostVolume, SERVICE_ACCOUNT_DIR};

/// The pod-wide parts every container of the pod shares.
pub struct PodParts<'a> {
    pub pod: &'a Pod,
    pub sandbox: &'a Sandbox,
    pub volumes: &'a BTreeMap<String, HostVolume>,
    /// The service account volume, when the pod mounts one.
    pub service_account: Option<&'a HostVolume>,
    pub hosts_file: &'a Path,
    pub resolv_conf: &'a Path,
}

pub fn spec(parts: &PodParts, c: &Container, env: Vec<(String, String)>) -> Result<ContainerSpec> {
    let pod_sc = parts
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user));
    let group = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group));
    let mut supplemental: Vec<u32> = pod_sc
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g as u32)
        .collect();
    if let Some(g) = pod_sc.and_then(|s| s.fs_group) {
        supplemental.push(g as u32);
    }
    let mut mounts = Vec::new();
    for vm in c.volume_mounts.iter().flatten() {
        let hv = parts
            .volumes
            .get(&vm.name)
            .with_context(|| format!("volumeMount {:?}: the pod has no such volume", vm.name))?;
        let mut host_path = hv.path.clone();
        if let Some(sub) = vm.sub_path.as_deref().filter(|s| !s.is_empty()) {
            if sub.starts_with('/') || sub.split('/').any(|p| p == "..") {
                bail!(
                    "volumeMount {:?}: subPath {sub:?} must stay inside the volume",
                    vm.name
                );
            }
            host_path = host_path.join(sub);
            if !host_path.exists() && !hv.read_only {
                std::fs::create_dir_all(&host_path)?;
            }
        }
        mounts.push(Mount {
            host_path,
            container_path: vm.mount_path.clone(),
            read_only: vm.read_only == Some(true) || hv.read_only,
        });
    }
    if let Some(sa) = parts.service_account
        && !mounts
            .iter()
            .any(|m| m.container_path == SERVICE_ACCOUNT_DIR)
    {
        mounts.push(Mount {
            host_path: sa.path.clone(),
            container_path: SERVICE_ACCOUNT_DIR.into(),
            read_only: true,
        });
    }
    let caps = sc.and_then(|s| s.capabilities.as_ref());
    Ok(ContainerSpec {
        image: c.image.clone().unwrap_or_default(),
        command: env::expand_all(c.command.as_deref().unwrap_or_default(), &env),
        args: env::expand_all(c.args.as_deref().unwrap_or_default(), &env),
        env,
        working_dir: c.working_dir.clone().filter(|w| !w.is_empty()),
        user: user.map(|u| u as u32),
        group: group.map(|g| g as u32),
        supplemental_groups: supplemental,
        hostname: Some(hosts::hostname(parts.pod)),
        mounts,
        netns: Some(parts.sandbox.netns_path.clone()),
        hosts_file: Some(parts.hosts_file.to_path_buf()),
        resolv_conf: Some(parts.resolv_conf.to_path_buf()),
        privileged: sc.and_then(|s| s.privileged) == Some(true),
        cap_add: caps.and_then(|c| c.add.clone()).unwrap_or_default(),
        cap_drop: caps.and_then(|c| c.drop.clone()).unwrap_or_default(),
        read_only_root_fs: sc.and_then(|s| s.read_only_root_filesystem) == Some(true),
        labels: BTreeMap::new(),
    })
}
