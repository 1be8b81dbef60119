//! The configuration text the operator generates: `slurm.conf` and `cgroup.conf` (Controller),
//! `slurmdbd.conf` (Accounting), the slurmd `--conf` string (NodeSet) and `sshd_config`.
//!
//! Everything here takes plain inputs, so it can be tested line by line.

use std::collections::{BTreeMap, BTreeSet};

use secrecy::{ExposeSecret, SecretString};

pub const SLURM_CONF: &str = "slurm.conf";
pub const CGROUP_CONF: &str = "cgroup.conf";
pub const SLURMDBD_CONF: &str = "slurmdbd.conf";
pub const SSHD_CONFIG: &str = "sshd_config";
pub const AUTHORIZED_KEYS: &str = "authorized_keys";

pub const SLURMCTLD_PORT: i32 = 6817;
pub const SLURMD_PORT: i32 = 6818;
pub const SLURMDBD_PORT: i32 = 6819;
pub const SLURMRESTD_PORT: i32 = 6820;
pub const SSH_PORT: i32 = 22;

pub const SLURM_USER: &str = "slurm";
pub const SLURM_ETC_DIR: &str = "/etc/slurm";
pub const SLURM_LOG_DIR: &str = "/var/log/slurm";
pub const SLURMCTLD_LOG_FILE: &str = "/var/log/slurm/slurmctld.log";
pub const SLURMD_LOG_FILE: &str = "/var/log/slurm/slurmd.log";
pub const SLURMCTLD_SPOOL_DIR: &str = "/var/spool/slurmctld";
pub const SLURMD_SPOOL_DIR: &str = "/var/spool/slurmd";

const AUTH_TYPE: &str = "auth/slurm";
const CRED_TYPE: &str = "cred/slurm";
const AUTH_ALT_TYPES: &str = "auth/jwt";
const AUTH_INFO: &str = "use_client_ids";
const JWT_PARAM: &str = "jwt_key=/etc/slurm/jwt.key";
const JWKS_PARAM: &str = "jwks=/etc/slurm/jwks.json";

/// Where slurmctld lives, as slurm.conf and the configless clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerHost {
    /// Our StatefulSet `<name>-controller` in `namespace`.
    Internal { name: String, namespace: String },
    /// `spec.external`: a slurmctld outside the cluster.
    External { host: String, port: i32 },
}

impl ControllerHost {
    /// `host:port` for `slurmd --conf-server` and `sackd --conf-server`.
    pub fn conf_server(&self) -> String {
        match self {
            ControllerHost::Internal { name, namespace } => {
                format!("{name}-controller.{namespace}:{SLURMCTLD_PORT}")
            }
            ControllerHost::External { host, port } => format!("{host}:{port}"),
        }
    }
}

/// One NodeSet that references the Controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSetEntry {
    /// The NodeSet CR name (the sort key).
    pub cr_name: String,
    /// The Slurm NodeSet/feature name (`NodeSetSpec::slurm_nodeset_name`).
    pub slurm_name: String,
    /// `spec.partition.config` when `spec.partition.enabled`.
    pub partition: Option<String>,
}

/// What `slurm.conf` is generated from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmConfInput {
    pub cluster_name: String,
    pub controller: ControllerHost,
    /// `spec.jwksKeyRef` is set.
    pub jwks: bool,
    /// `spec.metrics.enabled`.
    pub metrics: bool,
    /// Name of the referenced Accounting CR, when `accountingRef` resolves.
    pub accounting: Option<String>,
    /// File names (ConfigMap keys) of the prolog/epilog script ConfigMaps.
    pub prolog: Vec<String>,
    pub epilog: Vec<String>,
    pub prolog_slurmctld: Vec<String>,
    pub epilog_slurmctld: Vec<String>,
    pub nodesets: Vec<NodeSetEntry>,
    pub extra_conf: String,
}

/// `key=value` lines with optional raw lines; Slinky's config text shape.
struct Conf {
    sep: &'static str,
    lines: Vec<String>,
}

impl Conf {
    fn new() -> Self {
        Conf {
            sep: "=",
            lines: Vec::new(),
        }
    }

    fn with_separator(sep: &'static str) -> Self {
        Conf {
            sep,
            lines: Vec::new(),
        }
    }

    fn kv(&mut self, key: &str, value: impl std::fmt::Display) -> &mut Self {
        self.lines.push(format!("{key}{}{value}", self.sep));
        self
    }

    fn raw(&mut self, line: impl Into<String>) -> &mut Self {
        self.lines.push(line.into());
        self
    }

    fn section(&mut self, title: &str) -> &mut Self {
        self.raw("#").raw(format!("### {title} ###"))
    }

    /// A non-empty snippet becomes its own section.
    fn snippet_section(&mut self, title: &str, snippet: &str) -> &mut Self {
        if !snippet.is_empty() {
            self.section(title).raw(snippet);
        }
        self
    }

    /// With a final newline, like a file.
    fn file(&self) -> String {
        let mut out = self.lines.join("\n");
        out.push('\n');
        out
    }

    /// Without a final newline, to be embedded.
    fn snippet(&self) -> String {
        self.lines.join("\n")
    }
}

fn auth_alt_parameters(jwks: bool) -> Vec<String> {
    let mut params = vec![JWT_PARAM.to_owned()];
    if jwks {
        params.push(JWKS_PARAM.to_owned());
    }
    params
}

fn accounting_lines(conf: &mut Conf, accounting: Option<&str>) {
    conf.section("ACCOUNTING");
    match accounting {
        Some(acct) => {
            conf.kv("AccountingStorageType", "accounting_storage/slurmdbd")
                .kv("AccountingStorageHost", format!("{acct}-accounting"))
                .kv("AccountingStoragePort", SLURMDBD_PORT);
        }
        None => {
            conf.kv("AccountingStorageType", "accounting_storage/none");
        }
    }
}

/// The Controller's `slurm.conf` (configless, dynamic nodes: no `NodeName` lines).
pub fn slurm_conf(input: &SlurmConfInput) -> String {
    let merge = [
        ("AuthAltParameters", auth_alt_parameters(input.jwks)),
        ("AuthInfo", vec![AUTH_INFO.to_owned()]),
        (
            "SlurmctldParameters",
            vec![
                "enable_configless".to_owned(),
                "reconfig_on_restart".to_owned(),
            ],
        ),
    ];
    let merged = |key: &str| {
        merge
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.join(","))
            .unwrap_or_default()
    };

    let mut conf = Conf::new();
    conf.section("GENERAL")
        .kv("ClusterName", &input.cluster_name)
        .kv("SlurmUser", SLURM_USER);
    match &input.controller {
        ControllerHost::Internal { name, namespace } => {
            conf.kv(
                "SlurmctldHost",
                format!("{name}-controller-0({name}-controller.{namespace})"),
            )
            .kv("SlurmctldPort", SLURMCTLD_PORT);
        }
        ControllerHost::External { host, port } => {
            conf.kv("SlurmctldHost", host).kv("SlurmctldPort", port);
        }
    }
    conf.kv(
        "StateSaveLocation",
        format!("{SLURMCTLD_SPOOL_DIR}/{}", input.cluster_name),
    )
    .kv("SlurmdUser", "root")
    .kv("SlurmdPort", SLURMD_PORT)
    .kv("SlurmdSpoolDir", SLURMD_SPOOL_DIR)
    // Dynamic nodes need a non-zero ceiling.
    .kv("MaxNodeCount", 1024);

    conf.section("LOGGING")
        .kv("SlurmctldLogFile", SLURMCTLD_LOG_FILE)
        .kv("SlurmSchedLogFile", SLURMCTLD_LOG_FILE)
        .kv("SlurmdLogFile", SLURMD_LOG_FILE);

    conf.section("PLUGINS & PARAMETERS")
        .kv("AuthType", AUTH_TYPE)
        .kv("CredType", CRED_TYPE)
        .kv("AuthAltTypes", AUTH_ALT_TYPES)
        .kv("AuthAltParameters", merged("AuthAltParameters"))
        .kv("AuthInfo", merged("AuthInfo"))
        .kv("SlurmctldParameters", merged("SlurmctldParameters"));
    if input.metrics {
        conf.kv("MetricsType", "metrics/openmetrics");
    }

    accounting_lines(&mut conf, input.accounting.as_deref());

    let mut scripts = Conf::new();
    for f in sorted(&input.prolog_slurmctld) {
        scripts.kv("PrologSlurmctld", format!("{SLURM_ETC_DIR}/{f}"));
    }
    for f in sorted(&input.epilog_slurmctld) {
        scripts.kv("EpilogSlurmctld", format!("{SLURM_ETC_DIR}/{f}"));
    }
    conf.snippet_section("SLURMCTLD PROLOG & EPILOG", &scripts.snippet());

    // Bare names: configless ships the scripts to the nodes.
    let mut scripts = Conf::new();
    for f in sorted(&input.prolog) {
        scripts.kv("Prolog", f);
    }
    for f in sorted(&input.epilog) {
        scripts.kv("Epilog", f);
    }
    conf.snippet_section("PROLOG & EPILOG", &scripts.snippet());

    let mut nodesets: Vec<&NodeSetEntry> = input.nodesets.iter().collect();
    nodesets.sort_by(|a, b| a.cr_name.cmp(&b.cr_name));
    let mut lines = Conf::new();
    for ns in nodesets {
        let name = &ns.slurm_name;
        lines.raw(format!("NodeSet={name} Feature={name}"));
        if let Some(config) = &ns.partition {
            lines.raw(format!("PartitionName={name} Nodes={name} {config}"));
        }
    }
    conf.snippet_section("NODESET & PARTITION", &lines.snippet());

    conf.snippet_section("EXTRA CONFIG", &input.extra_conf);
    conf.snippet_section("MERGED CONFIG", &merged_config(&input.extra_conf, &merge));
    conf.file()
}

/// The `slurm.conf` for an external Controller: just enough for slurmrestd to reach it.
pub fn slurm_conf_minimal(input: &SlurmConfInput) -> String {
    let mut conf = Conf::new();
    conf.section("GENERAL")
        .kv("ClusterName", &input.cluster_name)
        .kv("SlurmUser", SLURM_USER);
    match &input.controller {
        ControllerHost::Internal { name, .. } => {
            conf.kv("SlurmctldHost", format!("{name}-controller-0"))
                .kv("SlurmctldPort", SLURMCTLD_PORT);
        }
        ControllerHost::External { host, port } => {
            conf.kv("SlurmctldHost", host).kv("SlurmctldPort", port);
        }
    }
    conf.section("PLUGINS & PARAMETERS")
        .kv("AuthType", AUTH_TYPE)
        .kv("CredType", CRED_TYPE)
        .kv("AuthAltTypes", AUTH_ALT_TYPES);
    accounting_lines(&mut conf, input.accounting.as_deref());
    conf.file()
}

/// The default `cgroup.conf` (left out when a `configFileRefs` ConfigMap brings its own).
pub fn cgroup_conf() -> String {
    let mut conf = Conf::new();
    conf.kv("CgroupPlugin", "cgroup/v2")
        .kv("IgnoreSystemd", "yes");
    conf.file()
}

/// What `slurmdbd.conf` is generated from. The password never shows in `Debug`.
#[derive(Debug, Clone)]
pub struct SlurmdbdConfInput {
    /// The Accounting CR name.
    pub name: String,
    pub jwks: bool,
    pub storage_host: String,
    pub storage_port: i32,
    pub storage_user: String,
    pub storage_database: String,
    pub storage_password: SecretString,
    pub extra_conf: String,
}

/// The Accounting's `slurmdbd.conf`; it holds the database password, hence the wrapper.
pub fn slurmdbd_conf(input: &SlurmdbdConfInput) -> SecretString {
    let merge = [
        ("AuthAltParameters", auth_alt_parameters(input.jwks)),
        ("AuthInfo", vec![AUTH_INFO.to_owned()]),
    ];
    let mut conf = Conf::new();
    conf.section("GENERAL")
        .kv("DbdHost", format!("{}-accounting-0", input.name))
        .kv("DbdPort", SLURMDBD_PORT)
        .kv("SlurmUser", SLURM_USER);
    conf.section("PLUGINS & PARAMETERS")
        .kv("AuthType", AUTH_TYPE)
        .kv("AuthAltTypes", AUTH_ALT_TYPES)
        .kv("AuthAltParameters", merge[0].1.join(","))
        .kv("AuthInfo", merge[1].1.join(","));
    conf.section("STORAGE")
        .kv("StorageType", "accounting_storage/mysql")
        .kv("StorageHost", &input.storage_host)
        .kv("StoragePort", input.storage_port)
        .kv("StorageUser", &input.storage_user)
        .kv("StorageLoc", &input.storage_database)
        .kv("StoragePass", input.storage_password.expose_secret());
    conf.section("LOGGING").kv("LogFile", "/dev/null");
    conf.snippet_section("EXTRA CONFIG", &input.extra_conf);
    conf.snippet_section("MERGED CONFIG", &merged_config(&input.extra_conf, &merge));
    conf.file().into()
}

/// Re-emits each operator-owned parameter list that `extra_conf` also sets, as the sorted union
/// of the operator's options and the user's (user options whose key the operator owns are
/// dropped; user options are lower-cased). Slurm takes the last occurrence, so this block,
/// written after the user's text, is what counts. Empty when the user sets none of them.
pub fn merged_config(extra_conf: &str, merge: &[(&str, Vec<String>)]) -> String {
    let user = parse_conf_kv(extra_conf);
    let mut keys: Vec<&(&str, Vec<String>)> = merge.iter().collect();
    keys.sort_by_key(|(k, _)| *k);
    let mut conf = Conf::new();
    for (key, ours) in keys {
        let Some(val) = user.get(&key.to_lowercase()) else {
            continue;
        };
        let mut values: BTreeSet<String> = ours.iter().cloned().collect();
        let mut seen: BTreeSet<String> = ours.iter().map(|v| option_key(v)).collect();
        for v in val.split(',').filter(|v| !v.is_empty()) {
            if seen.insert(option_key(v)) {
                values.insert(v.to_lowercase());
            }
        }
        conf.kv(key, values.into_iter().collect::<Vec<_>>().join(","));
    }
    conf.snippet()
}

fn option_key(option: &str) -> String {
    option
        .split_once('=')
        .map_or(option, |(k, _)| k)
        .to_lowercase()
}

/// The single-valued `Key=Value` lines of a slurm.conf snippet, keys lower-cased, last one
/// wins. Comments and `\` continuations are handled; lines with several `Key=Value` pairs
/// (values with spaces) are skipped.
fn parse_conf_kv(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut set = |logical: &str| {
        let Some((key, val)) = logical.trim().split_once('=') else {
            return;
        };
        let (key, val) = (key.trim(), val.trim());
        if key.is_empty() || val.is_empty() || val.contains([' ', '\n']) {
            return;
        }
        out.insert(key.to_lowercase(), val.to_owned());
    };
    let mut pending = String::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = line.split_once('#').map_or(line, |(before, _)| before);
        let line = line.trim_end_matches([' ', '\t']);
        if line.is_empty() {
            continue;
        }
        if let Some(before) = line.strip_suffix('\\') {
            pending.push_str(before);
            continue;
        }
        pending.push_str(line);
        set(&pending);
        pending.clear();
    }
    if !pending.is_empty() {
        set(&pending);
    }
    out
}

fn sorted(items: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = items.iter().collect();
    v.sort();
    v
}

/// A NodeSet's `extraConf`: space-separated `Key=Value[,Value…]` tokens, keys title-cased
/// (`feature=a` and `Feature=a` are the same key). Any token without `=` is an error naming it.
pub fn parse_extra_conf(extra_conf: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for token in extra_conf.split_whitespace() {
        let Some((key, val)) = token.split_once('=') else {
            return Err(format!(
                "malformed extraConf item {token:?}: expected Key=Value"
            ));
        };
        out.entry(title_case(key))
            .or_default()
            .extend(val.split(',').map(str::to_owned));
    }
    Ok(out)
}

/// Upper-cases the first letter of every word and lower-cases the rest (`realMemory` →
/// `Realmemory`), as Slinky's title-casing does; Slurm keys are case-insensitive.
fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_word = false;
    for c in s.chars() {
        if c.is_alphanumeric() || c == '_' {
            if in_word {
                out.extend(c.to_lowercase());
            } else {
                out.extend(c.to_uppercase());
            }
            in_word = true;
        } else {
            out.push(c);
            in_word = false;
        }
    }
    out
}

/// The value of slurmd's `--conf` argument, single-quoted for the entrypoint's shell:
/// sorted `Key=Value` items with `Features=<nodeset name + extraConf features, sorted,
/// deduplicated>`, `Topology` from the pod's `SLINKY_TOPOLOGY` env and the other extraConf
/// keys. A malformed extraConf (the webhook rejects it) falls back to the baseline.
pub fn slurmd_conf_arg(slurm_nodeset_name: &str, extra_conf: &str) -> String {
    let parsed = parse_extra_conf(extra_conf).unwrap_or_default();
    let mut features: BTreeSet<String> = BTreeSet::from([slurm_nodeset_name.to_owned()]);
    let mut items: BTreeMap<String, String> = BTreeMap::new();
    items.insert("Topology".into(), r#"'"$SLINKY_TOPOLOGY"'"#.into());
    for (key, vals) in parsed {
        if key == "Feature" || key == "Features" {
            features.extend(vals);
        } else {
            items.insert(key, vals.join(","));
        }
    }
    items.insert(
        "Features".into(),
        features.into_iter().collect::<Vec<_>>().join(","),
    );
    let mut list: Vec<String> = items.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    list.sort();
    format!("'{}'", list.join(" "))
}

/// A NodeSet's `sshd_config` (ssh enabled).
pub fn worker_sshd_config(extra: &str) -> String {
    let mut conf = Conf::with_separator(" ");
    conf.section("GENERAL")
        .kv("Include", "/etc/ssh/sshd_config.d/*.conf")
        .kv("UsePAM", "yes")
        .kv("Subsystem", "sftp internal-sftp")
        .kv("AuthenticationMethods", "publickey password");
    conf.section("EXTRA CONFIG").raw(extra);
    conf.file()
}

/// A LoginSet's `sshd_config`.
pub fn login_sshd_config(extra: &str) -> String {
    let mut conf = Conf::with_separator(" ");
    conf.section("GENERAL")
        .kv("Include", "/etc/ssh/sshd_config.d/*.conf")
        .kv("UsePAM", "yes")
        .kv("X11Forwarding", "yes")
        .kv("Subsystem", "sftp internal-sftp");
    conf.section("EXTRA CONFIG").raw(extra);
    conf.file()
}

/// A LoginSet's root `authorized_keys`.
pub fn authorized_keys(keys: &str) -> String {
    let mut conf = Conf::new();
    conf.section("SLINKY").raw(keys);
    conf.file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> SlurmConfInput {
        SlurmConfInput {
            cluster_name: "slurm_slurm".into(),
            controller: ControllerHost::Internal {
                name: "slurm".into(),
                namespace: "slurm".into(),
            },
            jwks: false,
            metrics: false,
            accounting: None,
            prolog: vec![],
            epilog: vec![],
            prolog_slurmctld: vec![],
            epilog_slurmctld: vec![],
            nodesets: vec![],
            extra_conf: String::new(),
        }
    }

    #[test]
    fn minimal_slurm_conf() {
        let want = "\
#
### GENERAL ###
ClusterName=slurm_slurm
SlurmUser=slurm
SlurmctldHost=slurm-controller-0(slurm-controller.slurm)
SlurmctldPort=6817
StateSaveLocation=/var/spool/slurmctld/slurm_slurm
SlurmdUser=root
SlurmdPort=6818
SlurmdSpoolDir=/var/spool/slurmd
MaxNodeCount=1024
#
### LOGGING ###
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmSchedLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
#
### PLUGINS & PARAMETERS ###
AuthType=auth/slurm
CredType=cred/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
AuthInfo=use_client_ids
SlurmctldParameters=enable_configless,reconfig_on_restart
#
### ACCOUNTING ###
AccountingStorageType=accounting_storage/none
";
        assert_eq!(slurm_conf(&input()), want);
    }

    #[test]
    fn full_slurm_conf() {
        let mut i = input();
        i.jwks = true;
        i.metrics = true;
        i.accounting = Some("slurm".into());
        i.prolog = vec!["b.sh".into(), "a.sh".into()];
        i.epilog = vec!["e.sh".into()];
        i.prolog_slurmctld = vec!["pc.sh".into()];
        i.epilog_slurmctld = vec!["ec.sh".into()];
        i.nodesets = vec![
            NodeSetEntry {
                cr_name: "slurm-worker-gpu".into(),
                slurm_name: "gpu".into(),
                partition: Some("State=UP MaxTime=1:00:00".into()),
            },
            NodeSetEntry {
                cr_name: "slurm-worker-cpu".into(),
                slurm_name: "cpu".into(),
                partition: None,
            },
        ];
        i.extra_conf = "SlurmctldParameters=idle_on_node_suspend,ENABLE_CONFIGLESS\nAuthInfo=cred_expire=70\nSchedulerType=sched/backfill".into();
        let conf = slurm_conf(&i);
        let tail = conf
            .split("MetricsType=metrics/openmetrics\n")
            .nth(1)
            .unwrap();
        let want = "\
#
### ACCOUNTING ###
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=slurm-accounting
AccountingStoragePort=6819
#
### SLURMCTLD PROLOG & EPILOG ###
PrologSlurmctld=/etc/slurm/pc.sh
EpilogSlurmctld=/etc/slurm/ec.sh
#
### PROLOG & EPILOG ###
Prolog=a.sh
Prolog=b.sh
Epilog=e.sh
#
### NODESET & PARTITION ###
NodeSet=cpu Feature=cpu
NodeSet=gpu Feature=gpu
PartitionName=gpu Nodes=gpu State=UP MaxTime=1:00:00
#
### EXTRA CONFIG ###
SlurmctldParameters=idle_on_node_suspend,ENABLE_CONFIGLESS
AuthInfo=cred_expire=70
SchedulerType=sched/backfill
#
### MERGED CONFIG ###
AuthInfo=cred_expire=70,use_client_ids
SlurmctldParameters=enable_configless,idle_on_node_suspend,reconfig_on_restart
";
        assert_eq!(tail, want);
        assert!(
            conf.contains(
                "AuthAltParameters=jwt_key=/etc/slurm/jwt.key,jwks=/etc/slurm/jwks.json\n"
            )
        );
        assert!(!conf.contains("NodeName="));
    }

    #[test]
    fn merged_config_drops_operator_keys() {
        let merge = [("AuthAltParameters", vec![JWT_PARAM.to_owned()])];
        assert_eq!(
            merged_config(
                "# c\nauthaltparameters=JWT_KEY=/x,disable_token_creation \\\n",
                &merge
            ),
            "AuthAltParameters=disable_token_creation,jwt_key=/etc/slurm/jwt.key"
        );
        assert_eq!(merged_config("NodeSet=a Feature=a", &merge), "");
    }

    #[test]
    fn external_minimal_conf() {
        let mut i = input();
        i.controller = ControllerHost::External {
            host: "ctld.example".into(),
            port: 7817,
        };
        let conf = slurm_conf_minimal(&i);
        assert!(conf.contains("SlurmctldHost=ctld.example\nSlurmctldPort=7817\n"));
        assert!(conf.ends_with("AccountingStorageType=accounting_storage/none\n"));
        assert_eq!(i.controller.conf_server(), "ctld.example:7817");
    }

    #[test]
    fn slurmdbd_conf_text() {
        let i = SlurmdbdConfInput {
            name: "slurm".into(),
            jwks: false,
            storage_host: "mariadb".into(),
            storage_port: 3306,
            storage_user: "slurm".into(),
            storage_database: "slurm_acct_db".into(),
            storage_password: "s3cret".into(),
            extra_conf: "AuthInfo=cred_expire=70".into(),
        };
        assert!(!format!("{i:?}").contains("s3cret"));
        let want = "\
#
### GENERAL ###
DbdHost=slurm-accounting-0
DbdPort=6819
SlurmUser=slurm
#
### PLUGINS & PARAMETERS ###
AuthType=auth/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
AuthInfo=use_client_ids
#
### STORAGE ###
StorageType=accounting_storage/mysql
StorageHost=mariadb
StoragePort=3306
StorageUser=slurm
StorageLoc=slurm_acct_db
StoragePass=s3cret
#
### LOGGING ###
LogFile=/dev/null
#
### EXTRA CONFIG ###
AuthInfo=cred_expire=70
#
### MERGED CONFIG ###
AuthInfo=cred_expire=70,use_client_ids
";
        assert_eq!(slurmdbd_conf(&i).expose_secret(), want);
    }

    #[test]
    fn cgroup_default() {
        assert_eq!(cgroup_conf(), "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n");
    }

    #[test]
    fn slurmd_conf_string() {
        assert_eq!(
            slurmd_conf_arg("cpu", ""),
            r#"'Features=cpu Topology='"$SLINKY_TOPOLOGY"''"#
        );
        assert_eq!(
            slurmd_conf_arg("cpu", "feature=b,a Features=cpu realMemory=1000 Gres=gpu:2"),
            r#"'Features=a,b,cpu Gres=gpu:2 Realmemory=1000 Topology='"$SLINKY_TOPOLOGY"''"#
        );
        assert_eq!(
            slurmd_conf_arg("cpu", "broken"),
            r#"'Features=cpu Topology='"$SLINKY_TOPOLOGY"''"#
        );
        assert!(parse_extra_conf("a=1 broken").is_err());
    }

    #[test]
    fn sshd_configs() {
        assert_eq!(
            worker_sshd_config("PermitRootLogin yes"),
            "#\n### GENERAL ###\nInclude /etc/ssh/sshd_config.d/*.conf\nUsePAM yes\n\
             Subsystem sftp internal-sftp\nAuthenticationMethods publickey password\n\
             #\n### EXTRA CONFIG ###\nPermitRootLogin yes\n"
        );
        assert!(login_sshd_config("").contains("X11Forwarding yes\n"));
    }
}
