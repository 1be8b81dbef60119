//! NodeSet rules.
//!
//! Slinky's: `controllerRef.name` non-empty and immutable; `volumeClaimTemplates` immutable (the
//! pods' claims are named from them); `rollingUpdate.maxUnavailable` above 0 and not `0%`;
//! `scheduledUpdate.duration` at least 1m; `ssh.enabled` needs `ssh.sssdConfRef.name`;
//! `template.spec.hostname` a DNS-1123 subdomain, a trailing `-` allowed since it is a prefix;
//! `extraConf` made of `Key=Value` tokens.
//!
//! Ours: the hostname prefix plus an ordinal must also be a DNS-1123 label (no dots, at most 63
//! characters), as the API server requires of a pod's hostname; a `maxUnavailable` string must
//! be a percentage; a duration of `0` is refused too (Slinky treats it as unset);
//! `extraConf` keys are letters, digits or `_` and tokens hold no `'`; `partition.config` is
//! one line (the CRD's pattern, checked again); `pinToNode: true`, which this operator does not
//! honour yet, warns. A Controller that does not exist yet warns on CREATE and is not refused
//! (Slinky does not look it up).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::conf::check_conf_tokens;
use super::{being_deleted, dns1123_subdomain_errors};
use crate::crd::{NodeSet, parse_go_duration};
use crate::webhook::verdict::{Findings, Lookup, Lookups, Verdict};

const MIN_SCHEDULED_DURATION: std::time::Duration = std::time::Duration::from_secs(60);

pub fn validate_nodeset(new: &NodeSet, old: Option<&NodeSet>, lookups: &Lookups) -> Verdict {
    if being_deleted(&new.metadata) {
        return Verdict::allow();
    }
    let mut f = Findings::default();
    let spec = &new.spec;

    let controller = spec.controller_ref.name.as_str();
    f.non_empty("spec.controllerRef.name", controller);
    f.immutable(
        "spec.controllerRef.name",
        controller,
        old.map(|o| o.spec.controller_ref.name.as_str()),
    );
    f.immutable(
        "spec.volumeClaimTemplates",
        &spec.volume_claim_templates,
        old.map(|o| &o.spec.volume_claim_templates),
    );
    // Objects arrive in any order (GitOps, `kubectl apply -f dir/`): a Controller that does
    // not exist yet is no reason to refuse. The reconciler waits for it, touching nothing, and
    // says so in the `Synced` condition; only a sure answer is worth a warning.
    if old.is_none()
        && !controller.is_empty()
        && *Lookups::get(&lookups.controllers, controller) == Lookup::NotFound
    {
        f.warn(
            "spec.controllerRef.name",
            format!(
                "Controller {controller:?} does not exist in this namespace yet: \
                 nothing is created for this NodeSet until it does"
            ),
        );
    }

    check_max_unavailable(
        &mut f,
        spec.update_strategy.rolling_update.max_unavailable.as_ref(),
    );
    if let Some(d) = &spec.update_strategy.scheduled_update.duration {
        let field = "spec.updateStrategy.scheduledUpdate.duration";
        match parse_go_duration(d) {
            None => f.error(field, format!("{d:?} is not a duration (e.g. 30m, 2h)")),
            Some(v) if v < MIN_SCHEDULED_DURATION => {
                f.error(field, format!("must be at least 1m, got {d:?}"));
            }
            Some(_) => {}
        }
    }

    if spec.pin_to_node && spec.is_daemonset() {
        f.warn(
            "spec.pinToNode",
            "has no effect with scalingMode DaemonSet, whose pods are already one per node",
        );
    }

    if spec.ssh.enabled && spec.ssh.sssd_conf_ref.name.is_empty() {
        f.error(
            "spec.ssh.sssdConfRef.name",
            "must not be empty when ssh.enabled is true",
        );
    }

    check_hostname(&mut f, new);
    check_conf_tokens(&mut f, "spec.extraConf", &spec.extra_conf);
    if spec.partition.config.contains(['\n', '\r']) {
        f.error("spec.partition.config", "must be a single line");
    }
    f.verdict()
}

fn check_max_unavailable(f: &mut Findings, value: Option<&IntOrString>) {
    let field = "spec.updateStrategy.rollingUpdate.maxUnavailable";
    match value {
        None => {}
        Some(IntOrString::Int(n)) if *n < 1 => {
            f.error(field, format!("must be greater than 0, got {n}"));
        }
        Some(IntOrString::Int(_)) => {}
        Some(IntOrString::String(s)) => match s.strip_suffix('%').map(str::parse::<u32>) {
            Some(Ok(0)) => f.error(field, "must not be 0%"),
            Some(Ok(_)) => {}
            _ => f.error(
                field,
                format!("{s:?} is neither an integer nor a percentage like 25%"),
            ),
        },
    }
}

/// The pods' hostnames are the prefix followed by the (padded) ordinal.
fn check_hostname(f: &mut Findings, nodeset: &NodeSet) {
    let field = "spec.template.spec.hostname";
    let Some(value) = nodeset.spec.template.spec.get("hostname") else {
        return;
    };
    let Some(prefix) = value.as_str() else {
        f.error(field, "must be a string");
        return;
    };
    if prefix.is_empty() {
        return;
    }
    let errors = dns1123_subdomain_errors(prefix, true);
    if !errors.is_empty() {
        for e in errors {
            f.error(field, format!("{prefix:?}: {e}"));
        }
        return;
    }
    if prefix.contains('.') {
        f.error(
            field,
            format!("{prefix:?}: must not contain '.': a pod's hostname is a DNS-1123 label"),
        );
    }
    let digits = usize::try_from(nodeset.spec.ordinal_padding)
        .unwrap_or(usize::MAX)
        .max(1);
    if prefix.len().saturating_add(digits) > 63 {
        f.error(
            field,
            format!("{prefix:?}: with the pod ordinal appended it exceeds 63 characters"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodeset(spec: &str) -> NodeSet {
        serde_yaml::from_str(&format!(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: NodeSet\nmetadata: {{name: workers, namespace: slurm}}\nspec: {spec}"
        ))
        .unwrap()
    }

    fn with(extra: &str) -> String {
        format!("{{controllerRef: {{name: slurm}}, {extra}}}")
    }

    fn found() -> Lookups {
        let mut l = Lookups::default();
        l.controllers.insert("slurm".into(), Lookup::Found(()));
        l
    }

    fn create(spec: &str) -> Verdict {
        validate_nodeset(&nodeset(spec), None, &found())
    }

    fn update(old: &str, new: &str) -> Verdict {
        validate_nodeset(&nodeset(new), Some(&nodeset(old)), &Lookups::default())
    }

    fn denied(v: &Verdict, msg: &str) {
        assert!(!v.allowed, "expected denial with {msg:?}, got {v:?}");
        assert!(
            v.message.contains(msg),
            "{:?} does not contain {msg:?}",
            v.message
        );
    }

    #[test]
    fn accepts_slinky_style_nodesets() {
        for spec in [
            "{controllerRef: {name: slurm}}",
            &with(
                "replicas: 0, template: {spec: {hostname: slinky-}}, extraConf: CPUs=2 RealMemory=2048",
            ),
            &with("updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 25%}}"),
            &with("updateStrategy: {rollingUpdate: {maxUnavailable: 1}}"),
            &with(
                "updateStrategy: {type: ScheduledUpdate, scheduledUpdate: {startTime: '2026-09-01T02:00:00Z', duration: 1m}}",
            ),
            &with("ssh: {enabled: true, sssdConfRef: {name: sssd, key: sssd.conf}}"),
            &with("ssh: {enabled: false}"),
            &with("partition: {enabled: true, config: State=UP MaxTime=INFINITE}"),
            &with("template: {spec: {hostname: gpu}}, ordinalPadding: 3"),
        ] {
            assert_eq!(create(spec), Verdict::allow(), "{spec}");
        }
        let spec = with("volumeClaimTemplates: [{metadata: {name: scratch}}]");
        assert_eq!(update(&spec, &spec), Verdict::allow());
    }

    #[test]
    fn controller_ref() {
        denied(
            &create("{controllerRef: {name: \"\"}}"),
            "spec.controllerRef.name: must not be empty",
        );
        denied(&create("{}"), "spec.controllerRef.name: must not be empty");
        denied(
            &update(
                "{controllerRef: {name: slurm}}",
                "{controllerRef: {name: other}}",
            ),
            "spec.controllerRef.name: field is immutable",
        );
        // A Controller created after its NodeSet (GitOps, `kubectl apply -f dir/`): accepted,
        // with a warning when the webhook knows for sure it is missing.
        let ns = nodeset("{controllerRef: {name: slurm}}");
        let mut missing = Lookups::default();
        missing.controllers.insert("slurm".into(), Lookup::NotFound);
        let v = validate_nodeset(&ns, None, &missing);
        assert!(v.allowed, "{v:?}");
        assert_eq!(
            v.warnings,
            [
                "spec.controllerRef.name: Controller \"slurm\" does not exist in this namespace yet: \
              nothing is created for this NodeSet until it does"
            ]
        );
        // A lookup that failed or was not made says nothing either way.
        let mut failed = Lookups::default();
        failed
            .controllers
            .insert("slurm".into(), Lookup::Failed("timeout".into()));
        for l in [failed, Lookups::default()] {
            assert_eq!(validate_nodeset(&ns, None, &l), Verdict::allow());
        }
        assert_eq!(validate_nodeset(&ns, None, &found()), Verdict::allow());
        // Existence is a CREATE rule: updates go through while the Controller is gone.
        assert!(
            update(
                "{controllerRef: {name: slurm}}",
                "{controllerRef: {name: slurm}, replicas: 2}"
            )
            .allowed
        );
    }

    #[test]
    fn volume_claim_templates_are_immutable() {
        denied(
            &update(
                &with("volumeClaimTemplates: [{metadata: {name: a}}]"),
                &with("volumeClaimTemplates: [{metadata: {name: b}}]"),
            ),
            "spec.volumeClaimTemplates: field is immutable",
        );
        denied(
            &update(
                "{controllerRef: {name: slurm}}",
                &with("volumeClaimTemplates: [{metadata: {name: b}}]"),
            ),
            "spec.volumeClaimTemplates: field is immutable",
        );
    }

    #[test]
    fn max_unavailable() {
        let field = "spec.updateStrategy.rollingUpdate.maxUnavailable";
        for (value, msg) in [
            ("0", "must be greater than 0, got 0"),
            ("-1", "must be greater than 0, got -1"),
            ("0%", "must not be 0%"),
            (
                "'3'",
                "\"3\" is neither an integer nor a percentage like 25%",
            ),
            ("abc%", "\"abc%\" is neither"),
        ] {
            denied(
                &create(&with(&format!(
                    "updateStrategy: {{rollingUpdate: {{maxUnavailable: {value}}}}}"
                ))),
                &format!("{field}: {msg}"),
            );
        }
        assert!(
            create(&with(
                "updateStrategy: {rollingUpdate: {maxUnavailable: 100%}}"
            ))
            .allowed
        );
    }

    #[test]
    fn scheduled_update_duration() {
        let field = "spec.updateStrategy.scheduledUpdate.duration";
        for (d, msg) in [
            ("59s", "must be at least 1m, got \"59s\""),
            ("\"0\"", "must be at least 1m"),
            ("soon", "\"soon\" is not a duration"),
        ] {
            denied(
                &create(&with(&format!(
                    "updateStrategy: {{scheduledUpdate: {{duration: {d}}}}}"
                ))),
                &format!("{field}: {msg}"),
            );
        }
        assert!(create(&with("updateStrategy: {scheduledUpdate: {duration: 2h}}")).allowed);
    }

    #[test]
    fn pin_to_node_warns_in_daemonset_mode_only() {
        let v = create(&with("pinToNode: true"));
        assert!(v.allowed, "{v:?}");
        assert!(v.warnings.is_empty(), "{v:?}");
        let v = create(&with("pinToNode: true, scalingMode: DaemonSet"));
        assert!(v.allowed, "{v:?}");
        assert_eq!(
            v.warnings,
            [
                "spec.pinToNode: has no effect with scalingMode DaemonSet, whose pods are already one per node"
            ]
        );
    }

    #[test]
    fn ssh_needs_sssd_conf() {
        denied(
            &create(&with("ssh: {enabled: true}")),
            "spec.ssh.sssdConfRef.name: must not be empty when ssh.enabled is true",
        );
    }

    #[test]
    fn hostname() {
        let field = "spec.template.spec.hostname";
        for (h, msg) in [
            ("Slinky-", "\"Slinky-\": a lowercase RFC 1123 subdomain"),
            ("gpu_a-", "\"gpu_a-\": a lowercase RFC 1123 subdomain"),
            ("'-'", "\"-\": a lowercase RFC 1123 subdomain"),
            ("a.b-", "\"a.b-\": must not contain '.'"),
            (
                &"a".repeat(63),
                "with the pod ordinal appended it exceeds 63 characters",
            ),
            ("7", "must be a string"),
        ] {
            let v = create(&with(&format!("template: {{spec: {{hostname: {h}}}}}")));
            denied(&v, &format!("{field}: "));
            denied(&v, msg);
        }
        assert!(
            create(&with(&format!(
                "template: {{spec: {{hostname: {}}}}}",
                "a".repeat(62)
            )))
            .allowed
        );
        denied(
            &create(&with(&format!(
                "ordinalPadding: 3, template: {{spec: {{hostname: {}}}}}",
                "a".repeat(61)
            ))),
            "exceeds 63 characters",
        );
        assert!(create(&with("template: {spec: {hostname: ''}}")).allowed);
    }

    #[test]
    fn extra_conf_and_partition() {
        denied(
            &create(&with("extraConf: CPUs=2 RealMemory")),
            "spec.extraConf: token \"RealMemory\" is not Key=Value",
        );
        denied(
            &create(&with(
                "partition: {enabled: true, config: \"State=UP\\nNodeName=x\"}",
            )),
            "spec.partition.config: must be a single line",
        );
    }

    #[test]
    fn all_errors_are_reported() {
        let v = create("{controllerRef: {name: \"\"}, extraConf: bad, ssh: {enabled: true}}");
        assert_eq!(
            v.message,
            "spec.controllerRef.name: must not be empty; \
             spec.ssh.sssdConfRef.name: must not be empty when ssh.enabled is true; \
             spec.extraConf: token \"bad\" is not Key=Value"
        );
    }
}
