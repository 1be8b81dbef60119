//! RBAC checked against what a component really did: the requests a service account made (from the
//! API server's audit log) against the rules bound to it (Roles and ClusterRoles through their
//! bindings, as the API server holds them). The test ground does not enforce RBAC, so a component
//! runs with whatever its chart grants and the audit log shows every request it needed.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde_json::Value;

/// One API request, as the audit log names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub verb: String,
    pub group: String,
    /// `pods`, or `pods/binding` with its subresource.
    pub resource: String,
    /// `None` for cluster-scoped resources.
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if let Some(ns) = &self.namespace {
            write!(f, " in {ns}")?;
        }
        if let Some(n) = &self.name {
            write!(f, " ({n})")?;
        }
        Ok(())
    }
}

/// One rule of a role as bound to the account: cluster-wide, or in one namespace.
#[derive(Clone, Debug)]
pub struct Grant {
    pub role: String,
    pub namespace: Option<String>,
    pub verbs: Vec<String>,
    pub groups: Vec<String>,
    pub resources: Vec<String>,
    pub names: Vec<String>,
}

impl Grant {
    fn allows(&self, r: &Request) -> bool {
        let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        let scope_ok = match (&self.namespace, &r.namespace) {
            (None, _) => true,
            (Some(g), Some(n)) => g == n,
            (Some(_), None) => false,
        };
        scope_ok
            && any(&self.verbs, &r.verb)
            && any(&self.groups, &r.group)
            && any(&self.resources, &r.resource)
            && (self.names.is_empty() || r.name.as_ref().is_some_and(|n| self.names.contains(n)))
    }
}

/// The requests `user` (e.g. `system:serviceaccount:ns:name`) made, from every audit file in the
/// directory of `audit_log` (the live one and the rotated `audit-*.log`). Non-resource requests
/// (discovery, /version) are left out: every authenticated user may make them.
pub fn requests(audit_log: &Path, user: &str) -> Vec<Request> {
    let dir = audit_log.parent().expect("the audit log is in a directory");
    let mut out = BTreeSet::new();
    let files = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("audit") && n.ends_with(".log"))
        });
    let needle = format!("\"username\":\"{user}\"");
    for file in files {
        let open = std::fs::File::open(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for line in std::io::BufRead::lines(std::io::BufReader::new(open)) {
            let line = line.unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if !line.contains(&needle) {
                continue;
            }
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if event["user"]["username"] != user {
                continue;
            }
            out.extend(from_event(&event));
        }
    }
    out.into_iter().collect()
}

/// The requests one audit event stands for. A patch or update answered 201 created its object:
/// the API server then also authorized `create` (server-side apply creates through patch), a check
/// the audit log shows only as this status.
fn from_event(event: &Value) -> Vec<Request> {
    let o = &event["objectRef"];
    let Some(resource) = o["resource"].as_str() else {
        return Vec::new();
    };
    let resource = match o["subresource"].as_str() {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    let request = Request {
        verb: event["verb"].as_str().unwrap_or_default().to_owned(),
        group: o["apiGroup"].as_str().unwrap_or_default().to_owned(),
        resource,
        namespace: o["namespace"].as_str().map(str::to_owned),
        name: o["name"].as_str().map(str::to_owned),
    };
    let created = event["responseStatus"]["code"] == 201;
    if created && (request.verb == "patch" || request.verb == "update") {
        let create = Request {
            verb: "create".into(),
            ..request.clone()
        };
        vec![request, create]
    } else {
        vec![request]
    }
}

/// The rules bound to service account `namespace`/`name`, from the objects of
/// `kubectl get clusterroles,clusterrolebindings,roles,rolebindings -A -o json` (one List).
pub fn grants(rbac: &Value, namespace: &str, name: &str) -> Vec<Grant> {
    let items = rbac["items"].as_array().cloned().unwrap_or_default();
    let kind = |v: &Value| v["kind"].as_str().unwrap_or_default().to_owned();
    let role = |k: &str, n: &str, ns: Option<&str>| {
        items.iter().find(|i| {
            kind(i) == k
                && i["metadata"]["name"] == n
                && (ns.is_none() || i["metadata"]["namespace"].as_str() == ns)
        })
    };
    let mut out = Vec::new();
    for b in &items {
        let k = kind(b);
        if k != "ClusterRoleBinding" && k != "RoleBinding" {
            continue;
        }
        let binds_us = b["subjects"].as_array().into_iter().flatten().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == name && s["namespace"] == namespace
        });
        if !binds_us {
            continue;
        }
        let scope = b["metadata"]["namespace"].as_str().map(str::to_owned);
        let ref_kind = b["roleRef"]["kind"].as_str().unwrap_or_default();
        let ref_name = b["roleRef"]["name"].as_str().unwrap_or_default();
        let found = if ref_kind == "Role" {
            role("Role", ref_name, scope.as_deref())
        } else {
            role("ClusterRole", ref_name, None)
        };
        let Some(found) = found else {
            panic!(
                "{k} {} refers to a missing {ref_kind} {ref_name}",
                b["metadata"]["name"]
            );
        };
        for rule in found["rules"].as_array().into_iter().flatten() {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            out.push(Grant {
                role: format!("{ref_kind} {ref_name}"),
                namespace: if k == "RoleBinding" {
                    scope.clone()
                } else {
                    None
                },
                verbs: list("verbs"),
                groups: list("apiGroups"),
                resources: list("resources"),
                names: list("resourceNames"),
            });
        }
    }
    out
}

/// What a check found: requests no grant allows, and granted (group, resource, verb)s that no
/// request used and that the caller did not list as expected to stay unused.
#[derive(Debug, Default)]
pub struct Report {
    pub missing: Vec<Request>,
    pub unused: Vec<String>,
    pub wildcards: Vec<String>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.unused.is_empty() && self.wildcards.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.missing {
            writeln!(f, "  used but not granted: {r}")?;
        }
        for u in &self.unused {
            writeln!(f, "  granted but never used: {u}")?;
        }
        for w in &self.wildcards {
            writeln!(f, "  wildcard grant: {w}")?;
        }
        Ok(())
    }
}

/// Checks `requests` against `grants`. `may_stay_unused` lists `verb group/resource` entries
/// (group `core` for the core group) that this run is not expected to exercise.
pub fn check(requests: &[Request], grants: &[Grant], may_stay_unused: &[&str]) -> Report {
    let mut report = Report::default();
    for r in requests {
        if !grants.iter().any(|g| g.allows(r)) {
            report.missing.push(r.clone());
        }
    }
    for g in grants {
        for group in &g.groups {
            for resource in &g.resources {
                for verb in &g.verbs {
                    let label = format!(
                        "{verb} {}/{resource}{} ({})",
                        if group.is_empty() { "core" } else { group },
                        g.namespace
                            .as_ref()
                            .map(|n| format!(" in {n}"))
                            .unwrap_or_default(),
                        g.role
                    );
                    if [group, resource, verb].iter().any(|s| s.as_str() == "*") {
                        report.wildcards.push(label);
                        continue;
                    }
                    let used = requests.iter().any(|r| {
                        &r.verb == verb
                            && &r.group == group
                            && &r.resource == resource
                            && g.allows(r)
                    });
                    let short = format!(
                        "{verb} {}/{resource}",
                        if group.is_empty() { "core" } else { group }
                    );
                    if !used && !may_stay_unused.contains(&short.as_str()) {
                        report.unused.push(label);
                    }
                }
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: &str, group: &str, resource: &str, ns: Option<&str>) -> Request {
        Request {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: ns.map(Into::into),
            name: None,
        }
    }

    #[test]
    fn an_apply_that_created_its_object_also_used_create() {
        let event = |verb: &str, code: u16| {
            serde_json::json!({"verb": verb, "responseStatus": {"code": code},
                "objectRef": {"resource": "configmaps", "namespace": "a", "name": "c", "apiVersion": "v1"}})
        };
        let verbs = |e: &Value| {
            from_event(e)
                .into_iter()
                .map(|r| r.verb)
                .collect::<Vec<_>>()
        };
        assert_eq!(verbs(&event("patch", 201)), ["patch", "create"]);
        assert_eq!(verbs(&event("patch", 200)), ["patch"]);
        assert_eq!(verbs(&event("get", 201)), ["get"]);
        let status = serde_json::json!({"verb": "patch", "responseStatus": {"code": 200},
            "objectRef": {"resource": "nodesets", "subresource": "status", "apiGroup": "slinky.slurm.net"}});
        assert_eq!(from_event(&status)[0].resource, "nodesets/status");
        assert!(from_event(&serde_json::json!({"verb": "get"})).is_empty());
    }

    #[test]
    fn finds_missing_unused_and_wildcard_grants() {
        let rbac = serde_json::json!({"items": [
            {"kind": "ClusterRole", "metadata": {"name": "op"}, "rules": [
                {"apiGroups": [""], "resources": ["pods", "pods/binding"], "verbs": ["get", "create"]},
                {"apiGroups": ["*"], "resources": ["leases"], "verbs": ["get"]}]},
            {"kind": "ClusterRoleBinding", "metadata": {"name": "op"},
             "roleRef": {"kind": "ClusterRole", "name": "op"},
             "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]},
            {"kind": "Role", "metadata": {"name": "r", "namespace": "sys"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"]}]},
            {"kind": "RoleBinding", "metadata": {"name": "r", "namespace": "sys"},
             "roleRef": {"kind": "Role", "name": "r"},
             "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]},
            {"kind": "ClusterRoleBinding", "metadata": {"name": "other"},
             "roleRef": {"kind": "ClusterRole", "name": "op"},
             "subjects": [{"kind": "ServiceAccount", "name": "someone", "namespace": "sys"}]},
        ]});
        let grants = grants(&rbac, "sys", "op");
        assert_eq!(grants.len(), 3);
        let requests = vec![
            req("get", "", "pods", Some("a")),
            req("create", "", "pods/binding", Some("a")),
            req("update", "coordination.k8s.io", "leases", Some("sys")),
            req("update", "coordination.k8s.io", "leases", Some("other")),
            req("delete", "", "pods", Some("a")),
        ];
        let report = check(&requests, &grants, &["get core/pods/binding"]);
        assert_eq!(
            report.missing,
            vec![
                req("update", "coordination.k8s.io", "leases", Some("other")),
                req("delete", "", "pods", Some("a"))
            ]
        );
        assert_eq!(report.unused, vec!["create core/pods (ClusterRole op)"]);
        assert_eq!(report.wildcards, vec!["get */leases (ClusterRole op)"]);
        assert!(!report.is_clean());
    }
}
