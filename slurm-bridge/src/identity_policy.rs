//! The identity policy (`identityPolicy` in the config file): per namespace, which Slurm
//! identities and privileges the pods there may ask for with the job annotations — user and
//! group ids, accounts, QOS, partitions, reservations, priority. Without a policy any value goes,
//! as in Slinky's bridge. The webhook refuses a pod that breaks it ([`IdentityPolicy::check`] on
//! the pod's own annotations) and the scheduler checks the job's effective values again (every
//! pod's and the root object's annotations, and the bridge's default partition) before it
//! submits, since the webhook may be off or the pod older than the policy.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use crate::annotations::{Invalid, JobFields, Sources};
use crate::keys::JOB_ANNOTATION_PREFIX;

/// `identityPolicy`: the rules of each listed namespace, and of the others.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct IdentityPolicy {
    /// The rules of namespaces not listed in `namespaces`; unset: no limits there.
    pub default: Option<Rules>,
    /// Rules per namespace. A namespace's rules replace the default's whole (they do not add to
    /// them), so that what applies to a namespace is all in one place.
    pub namespaces: BTreeMap<String, Rules>,
}

/// What the pods of a namespace may ask for. A key left out allows any value; a list allows
/// only its values, and an empty list none. A value the pods do not ask for is Slurm's default
/// (the token user's default account and QOS, the job running as the token's user), never
/// limited, except the partition: the bridge's default `partition` must be allowed too.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Rules {
    /// `user-id`: ids and ranges (`1000`, `"2000-2999"`).
    #[serde(deserialize_with = "present")]
    pub user_ids: Option<Vec<IdRange>>,
    /// `group-id`: ids and ranges.
    #[serde(deserialize_with = "present")]
    pub group_ids: Option<Vec<IdRange>>,
    /// `account`.
    #[serde(deserialize_with = "present")]
    pub accounts: Option<Vec<String>>,
    /// `qos`.
    #[serde(deserialize_with = "present")]
    pub qos: Option<Vec<String>>,
    /// `partition` (each of a comma-separated list), and the bridge's default partition.
    #[serde(deserialize_with = "present")]
    pub partitions: Option<Vec<String>>,
    /// `reservation` (each of a comma-separated list).
    #[serde(deserialize_with = "present")]
    pub reservations: Option<Vec<String>>,
    /// `priority`: at most this, or `forbidden`.
    #[serde(deserialize_with = "present")]
    pub max_priority: Option<PriorityLimit>,
}

/// Ids from `first` to `last`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    /// The first id.
    pub first: u32,
    /// The last id.
    pub last: u32,
}

/// The `maxPriority` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorityLimit {
    /// A priority up to this one.
    Max(u32),
    /// No `priority` annotation at all.
    Forbidden,
}

/// A key written with no value (`userIds:`) is YAML's null; taken as "left out" it would allow
/// any value where the writer most likely meant none, so it is an error instead.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    match Option::<T>::deserialize(d)? {
        Some(value) => Ok(Some(value)),
        None => Err(de::Error::custom(
            "has no value: write [] to allow none, or leave the key out to allow any",
        )),
    }
}

impl<'de> Deserialize<'de> for IdRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IdRange, D::Error> {
        struct Range;
        impl Visitor<'_> for Range {
            type Value = IdRange;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a numeric id or a range \"first-last\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IdRange, E> {
                let id = u32::try_from(v).map_err(|_| {
                    E::custom(format!("{v} is more than the largest id, {}", u32::MAX))
                })?;
                Ok(IdRange {
                    first: id,
                    last: id,
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IdRange, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("{v} is not an id (ids are not negative)")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IdRange, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Range)
    }
}

impl std::str::FromStr for IdRange {
    type Err = String;
    fn from_str(text: &str) -> Result<IdRange, String> {
        let bad = || format!("{text:?} is not an id or a range \"first-last\" of ids");
        let id = |t: &str| t.trim().parse::<u32>().map_err(|_| bad());
        let (first, last) = match text.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => (id(text)?, id(text)?),
        };
        if first > last {
            return Err(format!("the range {text:?} ends before it starts"));
        }
        Ok(IdRange { first, last })
    }
}

impl fmt::Display for IdRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl<'de> Deserialize<'de> for PriorityLimit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PriorityLimit, D::Error> {
        struct Limit;
        impl Visitor<'_> for Limit {
            type Value = PriorityLimit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number or \"forbidden\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PriorityLimit, E> {
                u32::try_from(v).map(PriorityLimit::Max).map_err(|_| {
                    E::custom(format!(
                        "{v} is more than Slurm's largest priority, {}",
                        u32::MAX
                    ))
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PriorityLimit, E> {
                u64::try_from(v)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PriorityLimit, E> {
                match v.trim() {
                    "forbidden" => Ok(PriorityLimit::Forbidden),
                    t => t
                        .parse()
                        .map(PriorityLimit::Max)
                        .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(Limit)
    }
}

/// At most this many of a rule's values are listed in a refusal.
const LISTED: usize = 10;
/// At most this many characters of a refused value are quoted back.
const QUOTED: usize = 100;

impl IdentityPolicy {
    /// Whether no namespace has any limit (Slinky's behaviour).
    pub fn is_open(&self) -> bool {
        self.default.is_none() && self.namespaces.is_empty()
    }

    /// The rules that apply in `namespace`, with their place in the config file.
    pub fn rules_for(&self, namespace: &str) -> Option<(String, &Rules)> {
        match self.namespaces.get(namespace) {
            Some(rules) => Some((format!("identityPolicy.namespaces.{namespace}"), rules)),
            None => self
                .default
                .as_ref()
                .map(|rules| ("identityPolicy.default".to_owned(), rules)),
        }
    }

    /// A value that is not one a policy could name (empty, padded or holding a comma) would
    /// never match, so it is a config error naming its place.
    pub fn validate(&self) -> Result<(), String> {
        if self.namespaces.contains_key("") {
            return Err("identityPolicy.namespaces: a namespace's name is empty".into());
        }
        let rules = self
            .default
            .iter()
            .map(|r| ("identityPolicy.default".to_owned(), r))
            .chain(
                self.namespaces
                    .iter()
                    .map(|(ns, r)| (format!("identityPolicy.namespaces.{ns}"), r)),
            );
        for (place, rules) in rules {
            for (key, names) in [
                ("accounts", &rules.accounts),
                ("qos", &rules.qos),
                ("partitions", &rules.partitions),
                ("reservations", &rules.reservations),
            ] {
                for (i, name) in names.iter().flatten().enumerate() {
                    if name.is_empty() || name.trim() != name || name.contains(',') {
                        return Err(format!(
                            "{place}.{key}[{i}]: {name:?} is not a name (empty, padded with spaces or holding a comma)"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the job fields a workload asks for (`fields`, set by the annotations `sources`
    /// names) are allowed in `namespace`. `default_partition` is the partition the bridge gives a
    /// job that names none, when it would apply (`None` when some other object may still name
    /// one, as a pod's root may for the webhook). The error names the annotation, the value, the
    /// namespace and the rule.
    pub fn check(
        &self,
        namespace: &str,
        fields: &JobFields,
        sources: &Sources,
        default_partition: Option<&str>,
    ) -> Result<(), Invalid> {
        let Some((place, rules)) = self.rules_for(namespace) else {
            return Ok(());
        };
        let refuse = |short: &str, message: String| Invalid {
            field: sources
                .get(short)
                .cloned()
                .unwrap_or_else(|| format!("{JOB_ANNOTATION_PREFIX}{short}")),
            message,
        };
        let not_allowed = |what: &str, value: &str, rule: &str, allowed: Vec<String>| {
            let rule = format!("{place}.{rule}");
            let allows = if allowed.is_empty() {
                format!("{rule} is empty: none may be asked for")
            } else {
                format!("{rule} allows {}", listed(&allowed))
            };
            format!("{what} {value} is not allowed in namespace {namespace:?} ({allows})")
        };
        for (short, id, ranges, rule, what) in [
            (
                "user-id",
                fields.user_id,
                &rules.user_ids,
                "userIds",
                "user id",
            ),
            (
                "group-id",
                fields.group_id,
                &rules.group_ids,
                "groupIds",
                "group id",
            ),
        ] {
            if let (Some(id), Some(ranges)) = (id, ranges)
                && !ranges.iter().any(|r| (r.first..=r.last).contains(&id))
            {
                let allowed = ranges.iter().map(IdRange::to_string).collect();
                return Err(refuse(
                    short,
                    not_allowed(what, &id.to_string(), rule, allowed),
                ));
            }
        }
        for (short, value, names, rule, what) in [
            (
                "account",
                &fields.account,
                &rules.accounts,
                "accounts",
                "account",
            ),
            ("qos", &fields.qos, &rules.qos, "qos", "QOS"),
            (
                "partition",
                &fields.partition,
                &rules.partitions,
                "partitions",
                "partition",
            ),
            (
                "reservation",
                &fields.reservation,
                &rules.reservations,
                "reservations",
                "reservation",
            ),
        ] {
            let Some(names) = names else { continue };
            let quoted = |n: &String| format!("{n:?}");
            match value {
                // Slurm takes a comma-separated list of partitions or reservations: each must
                // be allowed.
                Some(value) => {
                    if let Some(name) = value
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .find(|n| !names.iter().any(|allowed| allowed == n))
                    {
                        let allowed = names.iter().map(quoted).collect();
                        return Err(refuse(
                            short,
                            not_allowed(what, &quote(name), rule, allowed),
                        ));
                    }
                }
                None if short == "partition" => {
                    if let Some(default) = default_partition
                        && !names.iter().any(|allowed| allowed == default)
                    {
                        let allowed: Vec<String> = names.iter().map(quoted).collect();
                        let rule = format!("{place}.{rule}");
                        let allows = if allowed.is_empty() {
                            format!("{rule} is empty")
                        } else {
                            format!(
                                "{rule} allows {}; name one with this annotation",
                                listed(&allowed)
                            )
                        };
                        return Err(refuse(
                            short,
                            format!(
                                "unset, so the bridge's default partition {} (config `partition`) applies, which is not allowed in namespace {namespace:?} ({allows})",
                                quote(default)
                            ),
                        ));
                    }
                }
                None => {}
            }
        }
        if let (Some(priority), Some(limit)) = (fields.priority, rules.max_priority) {
            let rule = format!("{place}.maxPriority");
            match limit {
                PriorityLimit::Forbidden => {
                    return Err(refuse(
                        "priority",
                        format!(
                            "priority {priority} is not allowed in namespace {namespace:?} ({rule} is forbidden: no priority may be asked for)"
                        ),
                    ));
                }
                PriorityLimit::Max(max) if priority > max => {
                    return Err(refuse(
                        "priority",
                        format!(
                            "priority {priority} is not allowed in namespace {namespace:?} ({rule} is {max})"
                        ),
                    ));
                }
                PriorityLimit::Max(_) => {}
            }
        }
        Ok(())
    }
}

/// Whether `a` and `b` ask for the same of what the policy limits.
pub fn same_identity(a: &JobFields, b: &JobFields) -> bool {
    a.user_id == b.user_id
        && a.group_id == b.group_id
        && a.account == b.account
        && a.qos == b.qos
        && a.partition == b.partition
        && a.reservation == b.reservation
        && a.priority == b.priority
}

/// `value` quoted, cut to [`QUOTED`] characters: it comes from a pod, and a refusal should
/// stay a line.
fn quote(value: &str) -> String {
    match value.char_indices().nth(QUOTED) {
        Some((end, _)) => format!("{:?}…", &value[..end]),
        None => format!("{value:?}"),
    }
}

/// The first [`LISTED`] of `values`, and how many more.
fn listed(values: &[String]) -> String {
    let shown = values[..values.len().min(LISTED)].join(", ");
    match values.len().saturating_sub(LISTED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::job_fields_with_sources;
    use crate::config::Config;

    const POLICY: &str = "\
identityPolicy:
  default:
    userIds: []
    groupIds: []
    accounts: []
    qos: [normal]
    partitions: [slurm-bridge]
    reservations: []
    maxPriority: forbidden
  namespaces:
    ml:
      userIds: [1000, \"2000-2999\"]
      groupIds: [\"100\"]
      accounts: [ml, ml-gpu]
      partitions: [gpu, cpu]
      maxPriority: 500
    open: {}
";

    fn policy() -> IdentityPolicy {
        Config::parse(POLICY).unwrap().identity_policy
    }

    /// The verdict on one pod's `annotations` (short keys) in `namespace`, with the default
    /// partition `slurm-bridge` when `default_applies`.
    fn verdict(
        namespace: &str,
        annotations: &[(&str, &str)],
        default_applies: bool,
    ) -> Result<(), Invalid> {
        let map: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| {
                let key = if k.contains('/') {
                    k.to_string()
                } else {
                    format!("{JOB_ANNOTATION_PREFIX}{k}")
                };
                (key, v.to_string())
            })
            .collect();
        let (fields, sources) = job_fields_with_sources(&[&map]).unwrap();
        policy().check(
            namespace,
            &fields,
            &sources,
            default_applies.then_some("slurm-bridge"),
        )
    }

    #[test]
    fn the_decision_table() {
        // (namespace, annotations, default partition applies, refused annotation or None)
        type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], bool, Option<&'a str>);
        let table: &[Row] = &[
            // The default's rules: nothing asked for is fine, the default partition allowed.
            ("batch", &[], true, None),
            ("batch", &[("qos", "normal")], true, None),
            ("batch", &[("user-id", "0")], true, Some("user-id")),
            ("batch", &[("group-id", "0")], true, Some("group-id")),
            ("batch", &[("account", "root")], true, Some("account")),
            ("batch", &[("qos", "high")], true, Some("qos")),
            (
                "batch",
                &[("reservation", "maint")],
                true,
                Some("reservation"),
            ),
            ("batch", &[("priority", "0")], true, Some("priority")),
            ("batch", &[("partition", "slurm-bridge")], true, None),
            (
                "batch",
                &[("partition", "slurm-bridge,gpu")],
                true,
                Some("partition"),
            ),
            // Unlimited fields stay unlimited.
            ("batch", &[("job-name", "x"), ("wckey", "y")], true, None),
            // ml's own rules replace the default's whole.
            (
                "ml",
                &[("user-id", "1000"), ("group-id", "100")],
                false,
                None,
            ),
            ("ml", &[("user-id", "2000")], false, None),
            ("ml", &[("user-id", "2999")], false, None),
            ("ml", &[("user-id", "3000")], false, Some("user-id")),
            ("ml", &[("user-id", "1001")], false, Some("user-id")),
            ("ml", &[("group-id", "101")], false, Some("group-id")),
            ("ml", &[("account", "ml-gpu")], false, None),
            ("ml", &[("account", "ML")], false, Some("account")),
            (
                "ml",
                &[("qos", "anything"), ("reservation", "any")],
                false,
                None,
            ),
            ("ml", &[("partition", "gpu,cpu")], true, None),
            ("ml", &[("partition", " gpu , cpu ")], true, None),
            ("ml", &[("partition", "gpu,debug")], true, Some("partition")),
            // The bridge's default partition, when it would apply, must be allowed.
            ("ml", &[], true, Some("partition")),
            ("ml", &[], false, None),
            ("ml", &[("priority", "500")], false, None),
            ("ml", &[("priority", "501")], false, Some("priority")),
            // A namespace listed with no rules has no limits.
            (
                "open",
                &[("user-id", "0"), ("priority", "99999")],
                true,
                None,
            ),
        ];
        for (namespace, annotations, default_applies, refused) in table {
            let got = verdict(namespace, annotations, *default_applies);
            let want = refused.map(|k| format!("{JOB_ANNOTATION_PREFIX}{k}"));
            assert_eq!(
                got.as_ref().err().map(|e| e.field.clone()),
                want,
                "{namespace} {annotations:?}: {got:?}"
            );
        }
    }

    #[test]
    fn no_policy_is_slinky() {
        let open = IdentityPolicy::default();
        assert!(open.is_open());
        let map = BTreeMap::from([(format!("{JOB_ANNOTATION_PREFIX}user-id"), "0".to_owned())]);
        let (fields, sources) = job_fields_with_sources(&[&map]).unwrap();
        assert!(open.check("any", &fields, &sources, Some("p")).is_ok());
    }

    #[test]
    fn a_refusal_names_the_annotation_the_value_the_namespace_and_the_rule() {
        let err = verdict("ml", &[("user-id", "0")], false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "slurmjob.slinky.slurm.net/user-id: user id 0 is not allowed in namespace \"ml\" \
             (identityPolicy.namespaces.ml.userIds allows 1000, 2000-2999)"
        );
        let err = verdict("batch", &[("account", "root")], true).unwrap_err();
        assert_eq!(
            err.message,
            "account \"root\" is not allowed in namespace \"batch\" \
             (identityPolicy.default.accounts is empty: none may be asked for)"
        );
        let err = verdict("batch", &[("priority", "7")], true).unwrap_err();
        assert!(err.message.contains("maxPriority is forbidden"), "{err}");
        let err = verdict("ml", &[("priority", "501")], false).unwrap_err();
        assert!(
            err.message
                .ends_with("(identityPolicy.namespaces.ml.maxPriority is 500)"),
            "{err}"
        );
        let err = verdict("ml", &[], true).unwrap_err();
        assert_eq!(err.field, "slurmjob.slinky.slurm.net/partition");
        assert!(
            err.message
                .starts_with("unset, so the bridge's default partition \"slurm-bridge\"")
                && err.message.contains("allows \"gpu\", \"cpu\""),
            "{err}"
        );
        // The 0.x spelling is named as written; a long value is cut.
        let err = verdict(
            "ml",
            &[("slinky.slurm.net/account", &"x".repeat(5000))],
            false,
        )
        .unwrap_err();
        assert_eq!(err.field, "slinky.slurm.net/account");
        assert!(err.message.len() < 300, "{err}");
    }

    #[test]
    fn the_root_object_wins_and_is_checked() {
        // A gang's pods allowed, its PodGroup's annotation (the last layer) not.
        let pod = BTreeMap::from([(format!("{JOB_ANNOTATION_PREFIX}user-id"), "1000".to_owned())]);
        let root = BTreeMap::from([(format!("{JOB_ANNOTATION_PREFIX}user-id"), "0".to_owned())]);
        let (fields, sources) = job_fields_with_sources(&[&pod, &pod, &root]).unwrap();
        let err = policy().check("ml", &fields, &sources, None).unwrap_err();
        assert!(err.message.starts_with("user id 0 "), "{err}");
    }

    #[test]
    fn malformed_policies_are_config_errors_naming_the_field() {
        for (text, named) in [
            (
                "identityPolicy: {namespaces: {ml: {userIdz: [1]}}}",
                "userIdz",
            ),
            ("identityPolicy: {defaults: {}}", "defaults"),
            (
                "identityPolicy: {default: {userIds: [\"5-3\"]}}",
                "\"5-3\" ends before it starts",
            ),
            (
                "identityPolicy: {default: {userIds: [\"root\"]}}",
                "\"root\" is not an id",
            ),
            (
                "identityPolicy: {default: {groupIds: [-1]}}",
                "-1 is not an id",
            ),
            (
                "identityPolicy: {default: {userIds: [4294967296]}}",
                "largest id",
            ),
            (
                "identityPolicy: {default: {maxPriority: high}}",
                "\"forbidden\"",
            ),
            ("identityPolicy: {default: {accounts: physics}}", "accounts"),
            ("identityPolicy:\n  default:\n    userIds:\n", "write []"),
            (
                "identityPolicy: {default: {qos: [\" normal\"]}}",
                "identityPolicy.default.qos[0]",
            ),
            (
                "identityPolicy: {namespaces: {ml: {partitions: [a, \"b,c\"]}}}",
                "identityPolicy.namespaces.ml.partitions[1]",
            ),
        ] {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(named), "{text}: {err}");
        }
        let policy = Config::parse(
            "identityPolicy: {default: {userIds: [\" 10 - 20 \", 7], maxPriority: \"100\"}}",
        )
        .unwrap()
        .identity_policy;
        let rules = policy.default.unwrap();
        assert_eq!(
            rules.user_ids.unwrap(),
            [
                IdRange {
                    first: 10,
                    last: 20
                },
                IdRange { first: 7, last: 7 }
            ]
        );
        assert_eq!(rules.max_priority, Some(PriorityLimit::Max(100)));
    }
}
