//! Accounting rules: the JWT key ref (`jwtKeyRef`, or the deprecated `jwtHs256KeyRef`) is
//! immutable and `service.spec.externalIPs` warns (Slinky's); `extraConf` must be slurmdbd.conf
//! lines (ours: slurmdbd does not start on a line it cannot parse).

use super::conf::check_conf_lines;
use super::{being_deleted, warn_external_ips};
use crate::crd::Accounting;
use crate::webhook::verdict::{Findings, Lookups, Verdict};

pub fn validate_accounting(
    new: &Accounting,
    old: Option<&Accounting>,
    _lookups: &Lookups,
) -> Verdict {
    if being_deleted(&new.metadata) {
        return Verdict::allow();
    }
    let mut f = Findings::default();
    let spec = &new.spec;
    f.immutable(
        "spec.jwtKeyRef",
        spec.jwt_key_ref(),
        old.map(|o| o.spec.jwt_key_ref()),
    );
    check_conf_lines(&mut f, "spec.extraConf", &spec.extra_conf);
    warn_external_ips(&mut f, "spec.service", &spec.service);
    f.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounting(spec: &str) -> Accounting {
        serde_yaml::from_str(&format!(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: Accounting\nmetadata: {{name: slurm, namespace: slurm}}\nspec: {spec}"
        ))
        .unwrap()
    }

    fn check(new: &str, old: Option<&str>) -> Verdict {
        validate_accounting(
            &accounting(new),
            old.map(accounting).as_ref(),
            &Lookups::default(),
        )
    }

    const OK: &str = "{jwtKeyRef: {name: jwt, key: jwt.key}, storageConfig: {host: db, passwordKeyRef: {name: pw, key: password}}, extraConf: CommitDelay=1}";

    #[test]
    fn rules() {
        assert_eq!(check(OK, None), Verdict::allow());
        assert_eq!(check(OK, Some(OK)), Verdict::allow());
        assert!(
            check(
                "{jwtHs256KeyRef: {name: jwt, key: jwt.key}}",
                Some("{jwtKeyRef: {name: jwt, key: jwt.key}}")
            )
            .allowed
        );
        for (new, old) in [
            ("{jwtKeyRef: {name: other, key: jwt.key}}", OK),
            ("{jwtKeyRef: {name: jwt, key: other}}", OK),
            ("{jwtHs256KeyRef: {name: other, key: jwt.key}}", OK),
        ] {
            assert_eq!(
                check(new, Some(old)).message,
                "spec.jwtKeyRef: field is immutable",
                "{new}"
            );
        }
        let v = check("{extraConf: \"CommitDelay=1\\nbroken\"}", None);
        assert_eq!(
            v.message,
            "spec.extraConf: line 2: \"broken\" is not Key=Value"
        );
        let v = check("{service: {spec: {externalIPs: [1.1.1.1]}}}", None);
        assert!(v.allowed && v.warnings.len() == 1);
    }
}
