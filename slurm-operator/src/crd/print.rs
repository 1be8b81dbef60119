//! The CRDs of all six kinds, as objects and as YAML files (`slurm-operator crds`).

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::{Accounting, Controller, LoginSet, NodeSet, RestApi, Token};

/// The six CRDs, sorted by plural name, their schemas aligned with Slinky's
/// ([`super::parity`]).
pub fn all() -> Vec<CustomResourceDefinition> {
    [
        Accounting::crd(),
        Controller::crd(),
        LoginSet::crd(),
        NodeSet::crd(),
        RestApi::crd(),
        Token::crd(),
    ]
    .into_iter()
    .map(aligned)
    .collect()
}

fn aligned(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let plural = crd.spec.names.plural.clone();
    let mut value = serde_json::to_value(crd).expect("a CRD serializes");
    for version in value["spec"]["versions"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        super::parity::align(&plural, &mut version["schema"]["openAPIV3Schema"]);
    }
    serde_json::from_value(value).expect("an aligned CRD is still a CRD")
}

/// `(file name, YAML)` per CRD, named `slinky.slurm.net_<plural>.yaml` like Slinky's.
pub fn yaml_files() -> Vec<(String, String)> {
    all()
        .into_iter()
        .map(|crd| {
            let file = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
            let yaml = serde_yaml::to_string(&crd).expect("a CRD serializes to YAML");
            (file, yaml)
        })
        .collect()
}

/// Writes [`yaml_files`] into `dir` (created if missing); returns the paths written.
pub fn write_dir(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    yaml_files()
        .into_iter()
        .map(|(name, yaml)| {
            let path = dir.join(name);
            std::fs::write(&path, yaml)?;
            Ok(path)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn crd(plural: &str) -> Value {
        let crd = all()
            .into_iter()
            .find(|c| c.spec.names.plural == plural)
            .unwrap();
        serde_json::to_value(crd).unwrap()
    }

    fn version(plural: &str) -> Value {
        let mut c = crd(plural);
        assert_eq!(c["spec"]["versions"].as_array().unwrap().len(), 1);
        c["spec"]["versions"][0].take()
    }

    fn spec_schema(plural: &str) -> Value {
        version(plural)["schema"]["openAPIV3Schema"]["properties"]["spec"].take()
    }

    fn rules(schema: &Value) -> Vec<String> {
        schema["x-kubernetes-validations"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["rule"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn names_scope_and_short_names() {
        let expected = [
            ("accountings", "Accounting", &["slurmdbd"][..]),
            ("controllers", "Controller", &["slurmctld"]),
            ("loginsets", "LoginSet", &["loginsets", "lss", "sackd"]),
            ("nodesets", "NodeSet", &["nodesets", "nss", "slurmd"]),
            ("restapis", "RestApi", &["slurmrestd"]),
            ("tokens", "Token", &["tokens", "jwt"]),
        ];
        let files: Vec<String> = yaml_files().into_iter().map(|(f, _)| f).collect();
        for (plural, kind, short) in expected {
            let c = crd(plural);
            assert_eq!(c["metadata"]["name"], format!("{plural}.slinky.slurm.net"));
            assert_eq!(c["spec"]["group"], "slinky.slurm.net");
            assert_eq!(c["spec"]["scope"], "Namespaced");
            assert_eq!(c["spec"]["names"]["kind"], kind);
            assert_eq!(c["spec"]["names"]["shortNames"], serde_json::json!(short));
            let v = version(plural);
            assert_eq!(
                (
                    v["name"].as_str(),
                    v["served"].as_bool(),
                    v["storage"].as_bool()
                ),
                (Some("v1beta1"), Some(true), Some(true))
            );
            assert_eq!(v["subresources"]["status"], serde_json::json!({}));
            let cols = v["additionalPrinterColumns"].as_array().unwrap();
            assert_eq!(cols.last().unwrap()["name"], "AGE");
            assert!(files.contains(&format!("slinky.slurm.net_{plural}.yaml")));
        }
        assert_eq!(files.len(), 6);
    }

    #[test]
    fn printer_columns() {
        let cols = |plural: &str| -> Vec<(String, String, i64)> {
            version(plural)["additionalPrinterColumns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap().to_string(),
                        c["jsonPath"].as_str().unwrap().to_string(),
                        c["priority"].as_i64().unwrap_or(0),
                    )
                })
                .collect()
        };
        let ns = cols("nodesets");
        let names: Vec<&str> = ns.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "DESIRED",
                "REPLICAS",
                "UPDATED",
                "READY",
                "IDLE",
                "ALLOCATED",
                "DOWN",
                "DRAIN",
                "AGE"
            ]
        );
        assert_eq!(ns[4], ("IDLE".into(), ".status.slurmIdle".into(), 1));
        assert_eq!(ns[5].1, ".status.slurmAllocated");
        assert!(ns[..4].iter().all(|c| c.2 == 0) && ns[4..8].iter().all(|c| c.2 == 1));
        assert_eq!(
            cols("loginsets")[0],
            ("REPLICAS".into(), ".status.replicas".into(), 0)
        );
        let t = cols("tokens");
        assert_eq!(
            (t[0].1.as_str(), t[1].1.as_str()),
            (".spec.username", ".status.issuedAt")
        );
        assert_eq!(
            version("tokens")["additionalPrinterColumns"][1]["type"],
            "date"
        );
    }

    #[test]
    fn scale_subresource() {
        for plural in ["nodesets", "loginsets"] {
            assert_eq!(
                version(plural)["subresources"]["scale"],
                serde_json::json!({
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"
                })
            );
        }
        for plural in ["controllers", "restapis", "accountings", "tokens"] {
            assert!(version(plural)["subresources"].get("scale").is_none());
        }
    }

    #[test]
    fn cel_rules() {
        for plural in ["controllers", "accountings"] {
            let r = rules(&spec_schema(plural));
            assert!(r.contains(&"!self.external ? has(self.slurmKeyRef) : true".into()));
            assert!(r.contains(
                &"!self.external ? has(self.jwtKeyRef) || has(self.jwtHs256KeyRef) : true".into()
            ));
            assert!(r.contains(&"self.external ? has(self.externalConfig) : true".into()));
        }
        let r = rules(&spec_schema("controllers"));
        assert!(
            r.iter()
                .any(|r| r.starts_with("has(self.ha) && self.ha.enabled ?"))
        );
        assert_eq!(
            rules(&spec_schema("tokens")),
            ["has(self.jwtKeyRef) || has(self.jwtHs256KeyRef)"]
        );
        let ns = spec_schema("nodesets");
        let r = rules(&ns["properties"]["updateStrategy"]);
        assert!(r[0].starts_with("self.type != 'ScheduledUpdate' ||"));
        assert_eq!(
            ns["properties"]["partition"]["properties"]["config"]["pattern"],
            "^[^\\n]+$"
        );
    }

    #[test]
    fn defaults_enums_and_required() {
        let ns = spec_schema("nodesets");
        let p = &ns["properties"];
        assert_eq!(p["replicas"]["default"], 1);
        assert_eq!(p["scalingMode"]["default"], "StatefulSet");
        assert_eq!(
            p["scalingMode"]["enum"],
            serde_json::json!(["StatefulSet", "DaemonSet"])
        );
        assert_eq!(
            p["updateStrategy"]["properties"]["type"]["enum"],
            serde_json::json!(["RollingUpdate", "OnDelete", "ScheduledUpdate"])
        );
        assert_eq!(
            p["updateStrategy"]["properties"]["type"]["default"],
            "RollingUpdate"
        );
        assert_eq!(
            p["updateStrategy"]["properties"]["rollingUpdate"]["properties"]["maxUnavailable"]["default"],
            "25%"
        );
        assert_eq!(
            p["updateStrategy"]["properties"]["scheduledUpdate"]["properties"]["duration"]["default"],
            "30m"
        );
        assert_eq!(
            p["pruneSlurmNodeRecords"]["enum"],
            serde_json::json!(["Never", "NodeNotFound"])
        );
        assert_eq!(
            p["persistentVolumeClaimRetentionPolicy"]["properties"]["whenScaled"]["enum"],
            serde_json::json!(["Retain", "Delete"])
        );
        assert_eq!(p["workloadDisruptionProtection"]["default"], true);
        assert_eq!(
            p["template"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert_eq!(p["slurmd"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(ns["required"], serde_json::json!(["controllerRef"]));
        assert!(p.get("updateStrategy").unwrap().get("default").is_none());

        let status = &version("nodesets")["schema"]["openAPIV3Schema"]["properties"]["status"];
        assert_eq!(
            status["required"],
            serde_json::json!(["nodeSetHash", "selector"])
        );

        let c = spec_schema("controllers");
        assert_eq!(c["properties"]["external"]["default"], false);
        assert_eq!(c["properties"]["ha"]["properties"]["backups"]["default"], 1);
        assert_eq!(
            c["properties"]["persistence"]["properties"]["enabled"]["default"],
            true
        );
        assert!(
            c["properties"]["persistence"]["properties"]
                .get("storageClassName")
                .is_some()
        );
        let a = spec_schema("accountings");
        let sc = &a["properties"]["storageConfig"];
        assert_eq!(
            (
                sc["properties"]["port"]["default"].as_i64(),
                sc["properties"]["database"]["default"].as_str()
            ),
            (Some(3306), Some("slurm_acct_db"))
        );
        assert_eq!(
            sc["required"],
            serde_json::json!(["host", "passwordKeyRef"])
        );
        assert_eq!(
            spec_schema("loginsets")["required"],
            serde_json::json!(["controllerRef", "sssdConfRef"])
        );
        assert_eq!(
            spec_schema("restapis")["required"],
            serde_json::json!(["controllerRef"])
        );
        let t = spec_schema("tokens");
        assert_eq!(t["required"], serde_json::json!(["username"]));
        assert_eq!(t["properties"]["refresh"]["default"], true);
    }

    #[test]
    fn camel_case_field_names() {
        let c = spec_schema("controllers");
        for key in [
            "clusterName",
            "slurmKeyRef",
            "jwtHs256KeyRef",
            "jwtKeyRef",
            "jwksKeyRef",
            "accountingRef",
            "externalConfig",
            "inplaceReconfigure",
            "extraConf",
            "configFileRefs",
            "prologScriptRefs",
            "epilogScriptRefs",
            "prologSlurmctldScriptRefs",
            "epilogSlurmctldScriptRefs",
            "persistence",
            "service",
            "metrics",
            "ha",
            "logfile",
            "reconfigure",
            "slurmctld",
            "template",
        ] {
            assert!(c["properties"].get(key).is_some(), "controllers: {key}");
        }
        let n = spec_schema("nodesets");
        for key in [
            "controllerRef",
            "scalingMode",
            "extraConf",
            "volumeClaimTemplates",
            "updateStrategy",
            "revisionHistoryLimit",
            "persistentVolumeClaimRetentionPolicy",
            "minReadySeconds",
            "ordinalPadding",
            "pinToNode",
            "workloadDisruptionProtection",
            "pruneSlurmNodeRecords",
            "oversubscribeNode",
            "logfile",
            "ssh",
            "partition",
        ] {
            assert!(n["properties"].get(key).is_some(), "nodesets: {key}");
        }
        let l = spec_schema("loginsets");
        for key in [
            "initconf",
            "rootSshAuthorizedKeys",
            "extraSshdConfig",
            "sssdConfRef",
            "strategy",
        ] {
            assert!(l["properties"].get(key).is_some(), "loginsets: {key}");
        }
        let t = spec_schema("tokens");
        for key in [
            "jwtKeyRef",
            "jwtHs256KeyRef",
            "username",
            "lifetime",
            "refresh",
            "secretRef",
        ] {
            assert!(t["properties"].get(key).is_some(), "tokens: {key}");
        }
    }

    #[test]
    fn yaml_is_deterministic_and_parses_back() {
        let a = yaml_files();
        assert_eq!(a, yaml_files());
        for (name, yaml) in a {
            let back: CustomResourceDefinition = serde_yaml::from_str(&yaml).unwrap();
            assert_eq!(
                format!("{}_{}.yaml", back.spec.group, back.spec.names.plural),
                name
            );
        }
    }
}
