//! A RestApi's children: the slurmrestd Deployment and Service `N-restapi`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, SecurityContext, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;

use super::common::{
    self, ServiceParts, VOLUME_SLURM_ETC, config_map_items, env, mount, non_root_pod_security,
    pod_template, projected, secret_item, service_port, str_vec, tcp_port, tcp_probe,
};
use super::controller::config_name;
use super::labels::{self, Component};
use super::merge::merge_container;
use super::slurm_conf::{SLURM_CONF, SLURM_ETC_DIR, SLURMRESTD_PORT};
use super::{
    RenderError, SLURMRESTD_IMAGE, child_meta, controller_ref, cr_annotations, cr_labels,
    merge_maps,
};
use crate::crd::{Controller, RestApi};

/// slurmrestd runs as `nobody`.
const NOBODY: i64 = 65534;

/// `N-restapi`: the Deployment and Service name.
pub fn restapi_name(restapi: &str) -> String {
    format!("{restapi}-restapi")
}

/// The Deployment and Service of `restapi`, which talks to `controller` (its `controllerRef`).
pub fn render(
    restapi: &RestApi,
    controller: &Controller,
) -> Result<(Deployment, Service), RenderError> {
    Ok((deployment(restapi, controller)?, service(restapi)?))
}

fn component_labels(restapi: &RestApi) -> BTreeMap<String, String> {
    labels::component_labels(Component::RestApi, &restapi.name_any())
}

fn slurmrestd_container(
    restapi: &RestApi,
    controller: &Controller,
) -> Result<Container, RenderError> {
    let app = Component::RestApi.app();
    // Without slurmdbd only the slurmctld plugin works; with it, the defaults (incl. slurmdbd).
    let args = if controller.spec.accounting_ref.is_none() {
        str_vec(["-s", "openapi/slurmctld"])
    } else {
        Vec::new()
    };
    let base = Container {
        name: app.to_owned(),
        image: Some(SLURMRESTD_IMAGE.to_owned()),
        env: Some(vec![
            env("SLURM_JWT", "daemon"),
            env(
                "SLURMRESTD_SECURITY",
                "disable_unshare_files,disable_unshare_sysv",
            ),
        ]),
        args: (!args.is_empty()).then_some(args),
        ports: Some(vec![tcp_port(app, SLURMRESTD_PORT)]),
        startup_probe: Some(tcp_probe(SLURMRESTD_PORT, true)),
        liveness_probe: Some(tcp_probe(SLURMRESTD_PORT, true)),
        readiness_probe: Some(tcp_probe(SLURMRESTD_PORT, false)),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(NOBODY),
            run_as_group: Some(NOBODY),
            ..Default::default()
        }),
        volume_mounts: Some(vec![mount(VOLUME_SLURM_ETC, SLURM_ETC_DIR, true)]),
        ..Default::default()
    };
    let mut out = merge_container(base, &restapi.spec.slurmrestd.0)?;
    // The listen address is slurmrestd's positional argument: always last.
    out.args
        .get_or_insert_with(Vec::new)
        .push(format!("0.0.0.0:{SLURMRESTD_PORT}"));
    Ok(out)
}

/// The Deployment `N-restapi`.
pub fn deployment(restapi: &RestApi, controller: &Controller) -> Result<Deployment, RenderError> {
    let spec = &restapi.spec;
    let name = restapi.name_any();
    let slurm_key = controller.spec.slurm_key_ref.as_ref().ok_or_else(|| {
        RenderError::Invalid(format!(
            "Controller {:?} has no spec.slurmKeyRef for slurmrestd",
            controller.name_any()
        ))
    })?;
    let labels = merge_maps([
        &cr_labels(&restapi.metadata),
        &spec.template.metadata.labels,
        &component_labels(restapi),
    ]);
    let annotations = merge_maps([
        &cr_annotations(&restapi.metadata),
        &spec.template.metadata.annotations,
    ]);
    let mut pod_annotations = annotations.clone();
    pod_annotations.insert(
        crate::keys::ANNOTATION_DEFAULT_CONTAINER.into(),
        Component::RestApi.app().into(),
    );
    let base = PodSpec {
        automount_service_account_token: Some(false),
        containers: vec![slurmrestd_container(restapi, controller)?],
        security_context: Some(non_root_pod_security(NOBODY)),
        volumes: Some(vec![projected(
            VOLUME_SLURM_ETC,
            0o600,
            vec![
                config_map_items(
                    &config_name(&controller.name_any()),
                    &[(SLURM_CONF, SLURM_CONF, None)],
                ),
                secret_item(&slurm_key.name, &slurm_key.key, "slurm.key", None),
            ],
        )]),
        ..Default::default()
    };
    let template = pod_template(labels.clone(), pod_annotations, base, &spec.template.spec.0)?;
    Ok(Deployment {
        metadata: child_meta(
            restapi_name(&name),
            &restapi.namespace().unwrap_or_default(),
            labels,
            annotations,
            vec![controller_ref(restapi)?],
        ),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.replicas()),
            revision_history_limit: Some(0),
            selector: LabelSelector {
                match_labels: Some(labels::selector_labels(Component::RestApi, &name)),
                ..Default::default()
            },
            template,
            ..Default::default()
        }),
        status: None,
    })
}

/// The Service `N-restapi` (port `service.port` or 6820, named `slurmrestd`).
pub fn service(restapi: &RestApi) -> Result<Service, RenderError> {
    let name = restapi.name_any();
    let svc = &restapi.spec.service;
    common::service(ServiceParts {
        name: restapi_name(&name),
        namespace: &restapi.namespace().unwrap_or_default(),
        labels: merge_maps([
            &cr_labels(&restapi.metadata),
            &svc.metadata.labels,
            &component_labels(restapi),
        ]),
        annotations: merge_maps([
            &cr_annotations(&restapi.metadata),
            &svc.metadata.annotations,
        ]),
        user_spec: &svc.spec.0,
        selector: labels::selector_labels(Component::RestApi, &name),
        port: service_port(
            Component::RestApi.app(),
            svc.port_or(SLURMRESTD_PORT),
            svc.node_port,
        ),
        headless: false,
        owners: vec![controller_ref(restapi)?],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::test_support::with_meta;
    use serde_json::json;

    fn controller(accounting: bool) -> Controller {
        let mut spec = json!({
            "slurmKeyRef": {"name": "auth-slurm", "key": "slurm.key"},
            "jwtKeyRef": {"name": "auth-jwt", "key": "jwt.key"},
        });
        if accounting {
            spec["accountingRef"] = json!({"name": "slurm"});
        }
        with_meta("slurm", spec)
    }

    fn restapi() -> RestApi {
        with_meta(
            "slurm",
            json!({
                "controllerRef": {"name": "slurm"},
                "replicas": 2,
                "slurmrestd": {"image": "restd:1", "args": ["-vv"]},
            }),
        )
    }

    #[test]
    fn deployment_and_service() {
        let (dep, svc) = render(&restapi(), &controller(false)).unwrap();
        assert_eq!(dep.metadata.name.as_deref(), Some("slurm-restapi"));
        let spec = dep.spec.unwrap();
        assert_eq!(
            (spec.replicas, spec.revision_history_limit),
            (Some(2), Some(0))
        );
        let pod = spec.template.spec.unwrap();
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("restd:1"));
        assert_eq!(
            c.args.as_ref().unwrap(),
            &["-s", "openapi/slurmctld", "-vv", "0.0.0.0:6820"]
        );
        let env: Vec<_> = c
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap()))
            .collect();
        assert_eq!(
            env,
            [
                ("SLURM_JWT", "daemon"),
                (
                    "SLURMRESTD_SECURITY",
                    "disable_unshare_files,disable_unshare_sysv"
                )
            ]
        );
        assert_eq!(pod.security_context.unwrap().run_as_user, Some(65534));
        let sources = pod.volumes.unwrap()[0]
            .projected
            .clone()
            .unwrap()
            .sources
            .unwrap();
        let cm = sources[0].config_map.as_ref().unwrap();
        assert_eq!(cm.name, "slurm-config");
        assert_eq!(cm.items.as_ref().unwrap()[0].key, "slurm.conf");
        assert_eq!(sources[1].secret.as_ref().unwrap().name, "auth-slurm");

        assert_eq!(svc.metadata.name.as_deref(), Some("slurm-restapi"));
        let port = &svc.spec.unwrap().ports.unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("slurmrestd"), 6820)
        );
    }

    #[test]
    fn accounting_keeps_default_plugins() {
        let (dep, _) = render(&restapi(), &controller(true)).unwrap();
        let args = dep.spec.unwrap().template.spec.unwrap().containers[0]
            .args
            .clone()
            .unwrap();
        assert_eq!(args, ["-vv", "0.0.0.0:6820"]);
    }
}
