//! RestApi rules: `service.spec.externalIPs` warns (Slinky's); `controllerRef.name` non-empty
//! and immutable (ours: the Deployment's Slurm configuration and JWT come from that Controller).

use super::{being_deleted, warn_external_ips};
use crate::crd::RestApi;
use crate::webhook::verdict::{Findings, Lookups, Verdict};

pub fn validate_restapi(new: &RestApi, old: Option<&RestApi>, _lookups: &Lookups) -> Verdict {
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
    warn_external_ips(&mut f, "spec.service", &spec.service);
    f.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restapi(spec: &str) -> RestApi {
        serde_yaml::from_str(&format!(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: RestApi\nmetadata: {{name: slurm, namespace: slurm}}\nspec: {spec}"
        ))
        .unwrap()
    }

    fn check(new: &str, old: Option<&str>) -> Verdict {
        validate_restapi(
            &restapi(new),
            old.map(restapi).as_ref(),
            &Lookups::default(),
        )
    }

    #[test]
    fn rules() {
        let ok = "{controllerRef: {name: slurm}, replicas: 2}";
        assert_eq!(check(ok, None), Verdict::allow());
        assert_eq!(
            check(ok, Some("{controllerRef: {name: slurm}}")),
            Verdict::allow()
        );
        let v = check("{controllerRef: {name: \"\"}}", None);
        assert_eq!(v.message, "spec.controllerRef.name: must not be empty");
        let v = check("{controllerRef: {name: b}}", Some(ok));
        assert_eq!(v.message, "spec.controllerRef.name: field is immutable");
        let v = check(
            "{controllerRef: {name: slurm}, service: {spec: {externalIPs: []}}}",
            None,
        );
        assert!(v.allowed);
        assert_eq!(v.warnings.len(), 1);
    }
}
