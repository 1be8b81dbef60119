//! Controller rules.
//!
//! Slinky's: the cluster name (`clusterName`, default `<namespace>_<name>`) is at most 40
//! characters (Slurm's limit) and immutable, as are `slurmKeyRef.name`, the JWT key ref,
//! `persistence.enabled` and (while persistence is on) `persistence.existingClaim`: the
//! StatefulSet's claim template and slurmctld's saved state depend on them. `configFileRefs`
//! ConfigMaps must exist and must not hold `slurm.conf`/`slurmdbd.conf` (the operator generates
//! them); other keys Slurm does not read by itself give a warning. With `ha.enabled`, an
//! existing claim must be ReadWriteMany. `service.spec.externalIPs` warns.
//!
//! Ours: `extraConf` must be slurm.conf lines (`Key=Value…`, `Include …`, comments), and must not
//! set the parameters in [`OWNED_KEYS`], which the operator writes and everything around
//! slurmctld is built for. `ha.enabled`, accepted but not acted on yet, warns. Metrics
//! settings that cannot work warn too: a ServiceMonitor without `metrics.enabled`, and
//! `metrics.enabled` with `PrivateData` in `extraConf` (slurmctld then serves no metrics).

use super::conf::check_conf_lines;
use super::{being_deleted, warn_external_ips};
use crate::crd::Controller;
use crate::webhook::verdict::{Findings, Lookup, Lookups, Verdict};

/// Whether `extra_conf` sets `PrivateData` (any case), which turns slurmctld's metrics off.
fn has_private_data(extra_conf: &str) -> bool {
    extra_conf.lines().any(|l| {
        l.trim_start()
            .split('=')
            .next()
            .is_some_and(|k| k.trim().eq_ignore_ascii_case("PrivateData"))
            && l.contains('=')
    })
}

/// Whether `s` is a Prometheus duration (`30s`, `1m30s`, `500ms`, `0`): units from largest to
/// smallest, each at most once, as prometheus-operator's CRD pattern has it.
fn is_prometheus_duration(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    const UNITS: [&str; 7] = ["y", "w", "d", "h", "m", "s", "ms"];
    let (mut rest, mut next_unit) = (s, 0);
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        let after = &rest[digits..];
        // "ms" before "m", so that "5ms" is not read as minutes followed by junk.
        let Some((i, unit)) = UNITS
            .iter()
            .enumerate()
            .skip(next_unit)
            .filter(|(_, u)| after.starts_with(**u))
            .max_by_key(|(_, u)| u.len())
        else {
            return false;
        };
        next_unit = i + 1;
        rest = &after[unit.len()..];
    }
    !s.is_empty()
}

/// Slurm's limit for `ClusterName`.
const MAX_CLUSTER_NAME: usize = 40;

/// ConfigMap keys the operator writes itself.
const RESERVED_FILES: [&str; 2] = ["slurm.conf", "slurmdbd.conf"];

/// Files Slurm reads from its configuration directory by name.
const KNOWN_FILES: [&str; 14] = [
    "acct_gather.conf",
    "burst_buffer.conf",
    "cgroup.conf",
    "cli_filter.lua",
    "gres.conf",
    "helpers.conf",
    "job_container.conf",
    "job_submit.lua",
    "mpi.conf",
    "namespace.yaml",
    "oci.conf",
    "plugstack.conf",
    "topology.conf",
    "topology.yaml",
];

/// slurm.conf parameters `extraConf` may not set (compared case-insensitively, as Slurm does),
/// with why: the operator writes them, and the pods, Services and volumes it makes assume its
/// values. A later line overrides an earlier one in slurm.conf, so an `extraConf` line would win.
pub const OWNED_KEYS: [(&str, &str); 12] = [
    (
        "ClusterName",
        "comes from spec.clusterName; slurmctld refuses to start when it differs from its saved state",
    ),
    (
        "SlurmctldHost",
        "names the controller pods; workers, login and REST pods fetch their configuration from it",
    ),
    ("ControlMachine", "is the old name of SlurmctldHost"),
    ("ControlAddr", "is the old name of SlurmctldHost's address"),
    (
        "BackupController",
        "is the old name of a second SlurmctldHost",
    ),
    (
        "BackupAddr",
        "is the old name of a second SlurmctldHost's address",
    ),
    (
        "SlurmctldPort",
        "is the port of the controller Service, container and probes (6817)",
    ),
    (
        "SlurmdPort",
        "is the port of the workers' Service, containers and probes (6818)",
    ),
    (
        "StateSaveLocation",
        "is where the state volume is mounted; elsewhere the state is lost when the pod restarts",
    ),
    (
        "AuthType",
        "must be auth/slurm: the pods authenticate with the slurm.key Secret (there is no munge)",
    ),
    (
        "CredType",
        "must be cred/slurm, signed with the slurm.key Secret",
    ),
    (
        "SlurmUser",
        "is the user (uid 401) the controller pod runs as",
    ),
];

pub fn validate_controller(
    new: &Controller,
    old: Option<&Controller>,
    lookups: &Lookups,
) -> Verdict {
    if being_deleted(&new.metadata) {
        return Verdict::allow();
    }
    let mut f = Findings::default();
    let spec = &new.spec;
    let ns = new.metadata.namespace.as_deref().unwrap_or_default();
    let name = new.metadata.name.as_deref().unwrap_or_default();
    let cluster_name = spec.cluster_name_or(ns, name);

    match old {
        None if cluster_name.len() > MAX_CLUSTER_NAME => {
            let which = if spec.cluster_name.is_empty() {
                " (unset: the default <namespace>_<name>)"
            } else {
                ""
            };
            f.error(
                "spec.clusterName",
                format!(
                    "{cluster_name:?}{which} is {} characters long, Slurm allows at most {MAX_CLUSTER_NAME}",
                    cluster_name.len()
                ),
            );
        }
        None => {}
        Some(old) => {
            let o = &old.spec;
            let old_ns = old.metadata.namespace.as_deref().unwrap_or(ns);
            let old_name = old.metadata.name.as_deref().unwrap_or(name);
            f.immutable(
                "spec.clusterName",
                cluster_name.as_str(),
                Some(o.cluster_name_or(old_ns, old_name).as_str()),
            );
            let key_name =
                |c: &crate::crd::ControllerSpec| c.slurm_key_ref.as_ref().map(|r| r.name.clone());
            f.immutable("spec.slurmKeyRef.name", key_name(spec), Some(key_name(o)));
            f.immutable("spec.jwtKeyRef", spec.jwt_key_ref(), Some(o.jwt_key_ref()));
            f.immutable(
                "spec.persistence.enabled",
                spec.persistence_enabled(),
                Some(o.persistence_enabled()),
            );
            if spec.persistence_enabled() {
                f.immutable(
                    "spec.persistence.existingClaim",
                    spec.existing_claim(),
                    Some(o.existing_claim()),
                );
            }
        }
    }

    check_config_files(&mut f, new, lookups);
    check_ha_claim(&mut f, new, old, lookups);
    warn_external_ips(&mut f, "spec.service", &spec.service);
    // Accepted for Slinky's manifests, not acted on yet: say so rather than ignore it silently.
    if spec.ha.enabled {
        f.warn(
            "spec.ha.enabled",
            "not honoured yet by this operator: one slurmctld runs, without backup controllers",
        );
    }
    let monitor = &spec.metrics.service_monitor;
    let durations = [
        ("interval", monitor.interval.as_ref()),
        ("scrapeTimeout", monitor.scrape_timeout.as_ref()),
    ]
    .into_iter()
    .map(|(k, v)| (format!("spec.metrics.serviceMonitor.{k}"), v))
    .chain(monitor.endpoints.iter().enumerate().flat_map(|(i, e)| {
        [
            ("interval", e.interval.as_ref()),
            ("scrapeTimeout", e.scrape_timeout.as_ref()),
        ]
        .map(|(k, v)| (format!("spec.metrics.serviceMonitor.endpoints[{i}].{k}"), v))
    }));
    for (field, value) in durations {
        if let Some(v) = value.filter(|v| !v.is_empty() && !is_prometheus_duration(v)) {
            f.error(
                &field,
                format!("{v:?} is not a Prometheus duration (e.g. 30s, 1m30s, 500ms)"),
            );
        }
    }
    if spec.metrics.service_monitor.enabled && !spec.metrics.enabled {
        f.warn(
            "spec.metrics.serviceMonitor.enabled",
            "has no effect without spec.metrics.enabled: slurmctld serves no metrics",
        );
    }
    if spec.metrics.enabled && has_private_data(&spec.extra_conf) {
        f.warn(
            "spec.metrics.enabled",
            "slurmctld turns its metrics off while PrivateData is set (spec.extraConf)",
        );
    }

    for (line, key) in check_conf_lines(&mut f, "spec.extraConf", &spec.extra_conf) {
        if let Some((owned, why)) = OWNED_KEYS
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(&key))
        {
            f.error(
                "spec.extraConf",
                format!("line {line}: {owned} is set by the operator: it {why}"),
            );
        }
    }
    f.verdict()
}

fn check_config_files(f: &mut Findings, c: &Controller, lookups: &Lookups) {
    for (i, r) in c.spec.config_file_refs.iter().enumerate() {
        let field = format!("spec.configFileRefs[{i}].name");
        if r.name.is_empty() {
            f.error(&field, "must not be empty");
            continue;
        }
        match &*Lookups::get(&lookups.config_maps, &r.name) {
            Lookup::NotFound => f.error(&field, format!("ConfigMap {:?} not found", r.name)),
            Lookup::Failed(why) => f.error(
                &field,
                format!("could not check ConfigMap {:?}: {why}", r.name),
            ),
            Lookup::Found(keys) => {
                for key in keys {
                    if RESERVED_FILES.contains(&key.as_str()) {
                        f.error(
                            &field,
                            format!(
                                "ConfigMap {:?} has key {key:?}, which the operator generates",
                                r.name
                            ),
                        );
                    } else if !KNOWN_FILES.contains(&key.as_str()) {
                        f.warn(
                            &field,
                            format!(
                                "ConfigMap {:?} key {key:?} is not a file Slurm reads by itself; \
                                 include it from another file or it is ignored",
                                r.name
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// HA needs the state volume shared by all controller pods; checked when HA is turned on.
/// A claim that does not exist yet passes (as in Slinky): the StatefulSet waits for it.
fn check_ha_claim(f: &mut Findings, new: &Controller, old: Option<&Controller>, lookups: &Lookups) {
    let spec = &new.spec;
    if !spec.ha.enabled || old.is_some_and(|o| o.spec.ha.enabled) {
        return;
    }
    let Some(claim) = spec.existing_claim() else {
        return;
    };
    let field = "spec.persistence.existingClaim";
    match &*Lookups::get(&lookups.claims, claim) {
        Lookup::NotFound => {}
        Lookup::Failed(why) => f.error(
            field,
            format!("could not check PersistentVolumeClaim {claim:?}: {why}"),
        ),
        Lookup::Found(modes) if !modes.iter().any(|m| m == "ReadWriteMany") => f.error(
            field,
            format!(
                "ha.enabled needs PersistentVolumeClaim {claim:?} with access mode ReadWriteMany"
            ),
        ),
        Lookup::Found(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn controller(ns: &str, name: &str, spec: &str) -> Controller {
        let mut c: Controller = serde_yaml::from_str(&format!(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: Controller\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}"
        ))
        .unwrap();
        c.metadata.namespace = Some(ns.into());
        c
    }

    const BASE: &str =
        "{slurmKeyRef: {name: slurm-key, key: slurm.key}, jwtKeyRef: {name: jwt, key: jwt.key}}";

    fn with(extra: &str) -> String {
        format!(
            "{{slurmKeyRef: {{name: slurm-key, key: slurm.key}}, jwtKeyRef: {{name: jwt, key: jwt.key}}, {extra}}}"
        )
    }

    fn lookups(maps: &[(&str, Lookup<&[&str]>)]) -> Lookups {
        let mut l = Lookups::default();
        for (name, found) in maps {
            let v = match found {
                Lookup::Found(keys) => {
                    Lookup::Found(keys.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>())
                }
                Lookup::NotFound => Lookup::NotFound,
                Lookup::Failed(w) => Lookup::Failed(w.clone()),
            };
            l.config_maps.insert(name.to_string(), v);
        }
        l
    }

    fn create(spec: &str, l: &Lookups) -> Verdict {
        validate_controller(&controller("slurm", "slurm", spec), None, l)
    }

    fn update(old: &str, new: &str) -> Verdict {
        validate_controller(
            &controller("slurm", "slurm", new),
            Some(&controller("slurm", "slurm", old)),
            &Lookups::default(),
        )
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
    fn accepts_a_plain_controller() {
        assert_eq!(create(BASE, &Lookups::default()), Verdict::allow());
        assert_eq!(update(BASE, BASE), Verdict::allow());
    }

    #[test]
    fn cluster_name_length() {
        let v = create(
            &with(&format!("clusterName: {}", "c".repeat(41))),
            &Lookups::default(),
        );
        denied(&v, "spec.clusterName: \"ccccc");
        denied(&v, "is 41 characters long, Slurm allows at most 40");
        assert!(
            create(
                &with(&format!("clusterName: {}", "c".repeat(40))),
                &Lookups::default()
            )
            .allowed
        );
        // The default `<namespace>_<name>` counts too.
        let long = validate_controller(
            &controller(&"n".repeat(20), &"m".repeat(20), BASE),
            None,
            &Lookups::default(),
        );
        denied(
            &long,
            "(unset: the default <namespace>_<name>) is 41 characters long",
        );
        // Only on create: an existing object is not locked out.
        let c = controller(&"n".repeat(20), &"m".repeat(20), BASE);
        assert!(validate_controller(&c, Some(&c), &Lookups::default()).allowed);
    }

    #[test]
    fn immutable_fields() {
        for (old, new, field) in [
            (with("clusterName: a"), with("clusterName: b"), "spec.clusterName"),
            (BASE.to_string(), with("clusterName: other"), "spec.clusterName"),
            (
                BASE.to_string(),
                "{slurmKeyRef: {name: other, key: slurm.key}, jwtKeyRef: {name: jwt, key: jwt.key}}".into(),
                "spec.slurmKeyRef.name",
            ),
            (
                BASE.to_string(),
                "{slurmKeyRef: {name: slurm-key, key: slurm.key}, jwtKeyRef: {name: jwt, key: other.key}}".into(),
                "spec.jwtKeyRef",
            ),
            (
                BASE.to_string(),
                "{slurmKeyRef: {name: slurm-key, key: slurm.key}, jwtHs256KeyRef: {name: other, key: jwt.key}}".into(),
                "spec.jwtKeyRef",
            ),
            (BASE.to_string(), with("persistence: {enabled: false}"), "spec.persistence.enabled"),
            (
                with("persistence: {existingClaim: a}"),
                with("persistence: {existingClaim: b}"),
                "spec.persistence.existingClaim",
            ),
        ] {
            denied(&update(&old, &new), &format!("{field}: field is immutable"));
        }
        // Allowed changes: the slurm key's key, the deprecated JWT alias spelled the new way,
        // persistence.enabled defaulted vs explicit, existingClaim while persistence is off.
        for (old, new) in [
            (BASE.to_string(), "{slurmKeyRef: {name: slurm-key, key: other}, jwtKeyRef: {name: jwt, key: jwt.key}}".to_string()),
            (
                "{slurmKeyRef: {name: slurm-key, key: slurm.key}, jwtHs256KeyRef: {name: jwt, key: jwt.key}}".into(),
                BASE.to_string(),
            ),
            (BASE.to_string(), with("persistence: {enabled: true}")),
            (
                with("persistence: {enabled: false, existingClaim: a}"),
                with("persistence: {enabled: false, existingClaim: b}"),
            ),
            (BASE.to_string(), with("extraConf: \"A=1\"")),
        ] {
            let v = update(&old, &new);
            assert!(v.allowed, "{old} -> {new}: {v:?}");
        }
    }

    #[test]
    fn config_files() {
        let spec = with("configFileRefs: [{name: extra}]");
        let ok = lookups(&[("extra", Lookup::Found(&["cgroup.conf", "gres.conf"]))]);
        assert_eq!(create(&spec, &ok), Verdict::allow());

        let warn = create(
            &spec,
            &lookups(&[("extra", Lookup::Found(&["cgroup.conf", "my.conf"]))]),
        );
        assert!(warn.allowed);
        assert_eq!(warn.warnings.len(), 1);
        assert!(
            warn.warnings[0]
                .starts_with("spec.configFileRefs[0].name: ConfigMap \"extra\" key \"my.conf\"")
        );

        for reserved in ["slurm.conf", "slurmdbd.conf"] {
            let v = create(&spec, &lookups(&[("extra", Lookup::Found(&[reserved]))]));
            denied(
                &v,
                &format!(
                    "spec.configFileRefs[0].name: ConfigMap \"extra\" has key \"{reserved}\", which the operator generates"
                ),
            );
        }
        denied(
            &create(&spec, &lookups(&[("extra", Lookup::NotFound)])),
            "spec.configFileRefs[0].name: ConfigMap \"extra\" not found",
        );
        denied(
            &create(
                &spec,
                &lookups(&[("extra", Lookup::Failed("connection refused".into()))]),
            ),
            "spec.configFileRefs[0].name: could not check ConfigMap \"extra\": connection refused",
        );
        denied(
            &create(&spec, &Lookups::default()),
            "could not check ConfigMap \"extra\": it was not looked up",
        );
        denied(
            &create(&with("configFileRefs: [{name: \"\"}]"), &Lookups::default()),
            "spec.configFileRefs[0].name: must not be empty",
        );
    }

    #[test]
    fn fields_not_honoured_yet_warn() {
        let v = create(
            &with("ha: {enabled: true}, metrics: {enabled: true, serviceMonitor: {enabled: true}}"),
            &Lookups::default(),
        );
        assert!(v.allowed, "{v:?}");
        assert_eq!(
            v.warnings,
            [
                "spec.ha.enabled: not honoured yet by this operator: one slurmctld runs, without backup controllers",
            ]
        );
    }

    #[test]
    fn service_monitor_durations_must_be_prometheus_durations() {
        for good in ["30s", "1m30s", "500ms", "0", "1h", "2w1d"] {
            assert!(is_prometheus_duration(good), "{good}");
        }
        for bad in ["", "30", "s", "1s1m", "1.5s", "1m1m", " 30s", "-1s"] {
            assert!(!is_prometheus_duration(bad), "{bad}");
        }
        let v = create(
            &with(
                "metrics: {serviceMonitor: {interval: \"30\", endpoints: [{path: /metrics/jobs, scrapeTimeout: 5sec}]}}",
            ),
            &Lookups::default(),
        );
        assert!(!v.allowed);
        assert!(
            v.message.contains(
                "spec.metrics.serviceMonitor.interval: \"30\" is not a Prometheus duration"
            ),
            "{}",
            v.message
        );
        assert!(
            v.message
                .contains("spec.metrics.serviceMonitor.endpoints[0].scrapeTimeout: \"5sec\""),
            "{}",
            v.message
        );
        let v = create(
            &with("metrics: {serviceMonitor: {interval: \"\", scrapeTimeout: 10s}}"),
            &Lookups::default(),
        );
        assert!(v.allowed, "{v:?}");
    }

    #[test]
    fn metrics_settings_that_cannot_work_warn() {
        let v = create(
            &with("metrics: {serviceMonitor: {enabled: true}}"),
            &Lookups::default(),
        );
        assert!(v.allowed, "{v:?}");
        assert_eq!(
            v.warnings,
            [
                "spec.metrics.serviceMonitor.enabled: has no effect without spec.metrics.enabled: slurmctld serves no metrics"
            ]
        );
        let v = create(
            &with("metrics: {enabled: true}, extraConf: \"privatedata=jobs\""),
            &Lookups::default(),
        );
        assert!(v.allowed, "{v:?}");
        assert_eq!(
            v.warnings,
            [
                "spec.metrics.enabled: slurmctld turns its metrics off while PrivateData is set (spec.extraConf)"
            ]
        );
    }

    #[test]
    fn external_ips_warn() {
        let v = create(
            &with("service: {spec: {externalIPs: [1.2.3.4]}}"),
            &Lookups::default(),
        );
        assert!(v.allowed);
        assert_eq!(
            v.warnings,
            [
                "spec.service.spec.externalIPs: externalIPs are not applied to the Service (CVE-2020-8554)"
            ]
        );
        assert!(
            create(
                &with("service: {spec: {type: ClusterIP}}"),
                &Lookups::default()
            )
            .warnings
            .is_empty()
        );
    }

    #[test]
    fn extra_conf() {
        let ok = "extraConf: \"SchedulerType=sched/backfill\\n# c\\nPartitionName=all Nodes=ALL Default=YES\\n\"";
        assert_eq!(create(&with(ok), &Lookups::default()), Verdict::allow());
        denied(
            &create(
                &with("extraConf: \"A=1\\nthis is wrong\\n\""),
                &Lookups::default(),
            ),
            "spec.extraConf: line 2: \"this is wrong\" is not Key=Value",
        );
        for key in [
            "SlurmctldHost",
            "clustername",
            "STATESAVELOCATION",
            "SlurmctldPort",
            "SlurmdPort",
            "AuthType",
            "CredType",
            "ControlMachine",
            "SlurmUser",
        ] {
            let v = create(
                &with(&format!("extraConf: \"A=1\\n{key}=x\\n\"")),
                &Lookups::default(),
            );
            denied(&v, "spec.extraConf: line 2: ");
            denied(&v, "is set by the operator");
        }
        // Only a line's first key is a slurm.conf parameter.
        assert!(
            create(
                &with("extraConf: \"NodeName=x Port=1 ClusterName=y\""),
                &Lookups::default()
            )
            .allowed
        );
    }

    #[test]
    fn ha_claim_must_be_rwx() {
        let spec = with("ha: {enabled: true}, persistence: {enabled: true, existingClaim: state}");
        let claims = |modes: Lookup<Vec<String>>| {
            let mut l = Lookups::default();
            l.claims.insert("state".into(), modes);
            l
        };
        assert!(create(&spec, &claims(Lookup::Found(vec!["ReadWriteMany".into()]))).allowed);
        assert!(create(&spec, &claims(Lookup::NotFound)).allowed);
        denied(
            &create(&spec, &claims(Lookup::Found(vec!["ReadWriteOnce".into()]))),
            "spec.persistence.existingClaim: ha.enabled needs PersistentVolumeClaim \"state\" with access mode ReadWriteMany",
        );
        denied(
            &create(&spec, &claims(Lookup::Failed("timeout".into()))),
            "could not check PersistentVolumeClaim \"state\": timeout",
        );
        // Not looked at again while HA stays on.
        assert!(update(&spec, &spec).allowed);
    }

    #[test]
    fn deleting_is_always_allowed() {
        let mut c = controller("slurm", "slurm", &with("configFileRefs: [{name: gone}]"));
        c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ));
        assert!(validate_controller(&c, Some(&c), &Lookups::default()).allowed);
    }
}
