//! `Accounting` (`slurmdbd`): the Slurm accounting daemon and its database connection.

use k8s_openapi::api::core::v1::{ConfigMapKeySelector, SecretKeySelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    ContainerWrapper, ExternalConfig, OpenObject, PodTemplate, ServiceSpec, is_default, is_false,
    pick_jwt_key_ref, require,
};

/// Default `storageConfig.port`.
pub const DEFAULT_STORAGE_PORT: i32 = 3306;
/// Default `storageConfig.database`.
pub const DEFAULT_STORAGE_DATABASE: &str = "slurm_acct_db";

super::null::null_means_absent!(AccountingSpec, AccountingStatus);

#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "slinky.slurm.net",
    version = "v1beta1",
    kind = "Accounting",
    plural = "accountings",
    namespaced,
    derive = "PartialEq",
    status = "AccountingStatus",
    shortname = "slurmdbd",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "Slurm accounting (slurmdbd) backed by a MySQL/MariaDB database."
)]
#[schemars(extend("x-kubernetes-validations" = [
        {"rule": "!self.external ? has(self.slurmKeyRef) : true", "message": "slurmKeyRef is required unless external is true"},
        {"rule": "!self.external ? has(self.jwtKeyRef) || has(self.jwtHs256KeyRef) : true", "message": "jwtKeyRef (or the deprecated jwtHs256KeyRef) is required unless external is true"},
        {"rule": "self.external ? has(self.externalConfig) : true", "message": "externalConfig is required when external is true"},
    ]))]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct AccountingSpec {
    /// `auth/slurm` key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_key_ref: Option<SecretKeySelector>,
    /// Deprecated alias of `jwtKeyRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_hs256_key_ref: Option<SecretKeySelector>,
    /// `auth/jwt` HS256 key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_key_ref: Option<SecretKeySelector>,
    /// `auth/jwt` JWKS (`jwks.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_key_ref: Option<ConfigMapKeySelector>,
    /// slurmdbd runs outside Kubernetes; only `externalConfig` is used.
    #[serde(default, skip_serializing_if = "is_false")]
    #[schemars(extend("default" = false))]
    pub external: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_config: Option<ExternalConfig>,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub slurmdbd: ContainerWrapper,
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub template: PodTemplate,
    #[serde(default, skip_serializing_if = "is_default")]
    pub storage_config: StorageConfig,
    /// Appended to `slurmdbd.conf`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub extra_conf: String,
    #[serde(default, skip_serializing_if = "ServiceSpec::is_empty")]
    pub service: ServiceSpec,
}

/// `spec.storageConfig`: the accounting database.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["host", "passwordKeyRef"]))]
pub struct StorageConfig {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// Default 3306.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 3306))]
    pub port: Option<i32>,
    /// Default `slurm_acct_db`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("default" = "slurm_acct_db"))]
    pub database: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// Secret key holding the database password.
    #[serde(default, skip_serializing_if = "is_default")]
    pub password_key_ref: SecretKeySelector,
}

impl StorageConfig {
    pub fn port(&self) -> i32 {
        match self.port {
            Some(p) if p != 0 => p,
            _ => DEFAULT_STORAGE_PORT,
        }
    }

    pub fn database(&self) -> &str {
        if self.database.is_empty() {
            DEFAULT_STORAGE_DATABASE
        } else {
            &self.database
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct AccountingStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl AccountingSpec {
    /// The JWT signing key: `jwtKeyRef`, else the deprecated `jwtHs256KeyRef`.
    pub fn jwt_key_ref(&self) -> Option<&SecretKeySelector> {
        pick_jwt_key_ref(&self.jwt_key_ref, &self.jwt_hs256_key_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_style_manifest() {
        let a: Accounting = serde_yaml::from_str(
            r#"
apiVersion: slinky.slurm.net/v1beta1
kind: Accounting
metadata: {name: slurm, namespace: slurm}
spec:
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}
  jwksKeyRef: {name: slurm-auth-jwks, key: jwks.json}
  slurmdbd:
    image: ghcr.io/slinkyproject/slurmdbd:26.05-ubuntu26.04
    futureContainerField: 1
  storageConfig:
    host: mariadb
    username: slurm
    passwordKeyRef: {name: mariadb-password, key: password}
  extraConf: CommitDelay=1
"#,
        )
        .unwrap();
        let s = &a.spec;
        assert_eq!(s.jwt_key_ref().unwrap().name, "slurm-auth-jwt");
        assert_eq!(s.jwks_key_ref.as_ref().unwrap().key, "jwks.json");
        assert_eq!(s.storage_config.port(), 3306);
        assert_eq!(s.storage_config.database(), "slurm_acct_db");
        assert_eq!(s.storage_config.password_key_ref.name, "mariadb-password");
        assert_eq!(s.extra_conf, "CommitDelay=1");
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(
            json["spec"]["storageConfig"]["passwordKeyRef"]["key"],
            "password"
        );
        assert_eq!(json["spec"]["slurmdbd"]["futureContainerField"], 1);

        let s: AccountingSpec = serde_yaml::from_str(
            "jwtHs256KeyRef: {name: old, key: k}\nstorageConfig: {host: db, port: 3307, database: acct}",
        )
        .unwrap();
        assert_eq!(s.jwt_key_ref().unwrap().name, "old");
        assert_eq!(
            (s.storage_config.port(), s.storage_config.database()),
            (3307, "acct")
        );
    }
}
