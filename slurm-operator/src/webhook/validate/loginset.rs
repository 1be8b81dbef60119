//! LoginSet rules (Slinky's): `controllerRef.name` non-empty and immutable,
//! `sssdConfRef.name` non-empty, `service.spec.externalIPs` warns.

use super::{being_deleted, warn_external_ips};
use crate::crd::LoginSet;
use crate::webhook::verdict::{Findings, Lookups, Verdict};

pub fn validate_loginset(new: &LoginSet, old: Option<&LoginSet>, _lookups: &Lookups) -> Verdict {
    if being_deleted(&new.metadata) {
        return Verdict::allow();
    }
    let mut f = Findings::default();
    let spec = &new.spec;
    f.non_empty("spec.controllerRef.name", &spec.controller_ref.name);
    f.immutable(
        "spec.controllerRef.name",
        &spec.controller_ref.name,
        old.map(|o| &o.spec.controller_ref.name),
    );
    f.non_empty("spec.sssdConfRef.name", &spec.sssd_conf_ref.name);
    warn_external_ips(&mut f, "spec.service", &spec.service);
    f.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loginset(spec: &str) -> LoginSet {
        serde_yaml::from_str(&format!(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: LoginSet\nmetadata: {{name: login, namespace: slurm}}\nspec: {spec}"
        ))
        .unwrap()
    }

    const OK: &str = "{controllerRef: {name: slurm}, sssdConfRef: {name: sssd, key: sssd.conf}}";

    fn check(new: &str, old: Option<&str>) -> Verdict {
        validate_loginset(
            &loginset(new),
            old.map(loginset).as_ref(),
            &Lookups::default(),
        )
    }

    #[test]
    fn rules() {
        assert_eq!(check(OK, None), Verdict::allow());
        assert_eq!(check(OK, Some(OK)), Verdict::allow());
        for (new, old, msg) in [
            (
                "{sssdConfRef: {name: sssd}}",
                None,
                "spec.controllerRef.name: must not be empty",
            ),
            (
                "{controllerRef: {name: slurm}}",
                None,
                "spec.sssdConfRef.name: must not be empty",
            ),
            (
                "{controllerRef: {name: other}, sssdConfRef: {name: sssd}}",
                Some(OK),
                "spec.controllerRef.name: field is immutable",
            ),
        ] {
            let v = check(new, old);
            assert!(!v.allowed && v.message.contains(msg), "{new}: {v:?}");
        }
        let v = check(
            "{controllerRef: {name: slurm}, sssdConfRef: {name: sssd}, service: {spec: {externalIPs: [10.0.0.1]}}}",
            None,
        );
        assert!(v.allowed);
        assert_eq!(v.warnings.len(), 1);
        assert!(v.warnings[0].starts_with("spec.service.spec.externalIPs: "));
    }
}
