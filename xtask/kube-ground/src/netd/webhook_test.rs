//! Webhooks given as a Service reference, on the running test ground (`cargo xtask kube up`):
//! the API server on the host calls them through netd's dial socket ([`super::dial`]), with the
//! TLS server name `<name>.<namespace>.svc` checked against the caBundle as a real API server
//! checks it.
//!
//! The webhook server is Python's standard library (`python3`, which `cargo xtask test` needs
//! for Helm already) with a CA and certificate `openssl` makes, run inside the ground's network
//! namespace as if in a pod and listening on the ground's gateway address; a Service without a
//! selector and an EndpointSlice written here lead to it. Needs root, the ground, python3 and
//! openssl; fails (never skips) without them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use kube_ground::net::NetConfig;
use test_support::ground::Ground;

/// Admission reviews at `/validate` (objects whose name starts with `denied` are denied) and
/// conversion reviews at `/convert` (each object is given the desired apiVersion and a
/// `spec.convertedBy`), over HTTPS on `argv[1]` at a port of the kernel's choice.
const SERVER: &str = r#"
import http.server, json, ssl, sys

class Hook(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        if self.path.startswith("/validate"):
            name = req["object"]["metadata"]["name"]
            response = {"uid": req["uid"], "allowed": not name.startswith("denied")}
            if not response["allowed"]:
                response["status"] = {"code": 403, "message": "the test webhook denies " + name}
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        else:
            objects = req["objects"]
            for o in objects:
                o["apiVersion"] = req["desiredAPIVersion"]
                o.setdefault("spec", {})["convertedBy"] = "the test webhook"
            review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                      "response": {"uid": req["uid"], "convertedObjects": objects, "result": {"status": "Success"}}}
        body = json.dumps(review).encode()
        # Logged before the answer goes out: a test that reads the log once its request is
        # answered must find the line (logged after, it could be read before it was written).
        print("served", self.path, "from", self.client_address[0], flush=True)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer((sys.argv[1], 0), Hook)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(sys.argv[2], sys.argv[3])
server.socket = tls.wrap_socket(server.socket, server_side=True)
print("listening on port", server.server_address[1], flush=True)
server.serve_forever()
"#;

const GROUP: &str = "netd-dial-test.slurm-dev.example";
const CONFIG: &str = "netd-dial-test";

/// Cluster-wide objects of the test, deleted when it ends however it ends.
struct Cleanup<'a>(&'a Ground, Vec<String>);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for what in &self.1 {
            let _ = self.0.kubectl(
                &["delete", what, "--ignore-not-found", "--wait=false"],
                None,
            );
        }
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a serving certificate it signed for `dns_name`, in `dir`: ca.crt, tls.crt, tls.key.
fn certificates(dir: &Path, dns_name: &str) {
    std::fs::write(
        dir.join("openssl.cnf"),
        format!(
            "[req]\ndistinguished_name = dn\n[dn]\n\
             [ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n\
             [leaf]\nbasicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n\
             extendedKeyUsage = serverAuth\nsubjectAltName = DNS:{dns_name}\n"
        ),
    )
    .unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec![
        "req",
        "-x509",
        "-config",
        "openssl.cnf",
        "-extensions",
        "ca",
    ];
    ca.extend(ec);
    ca.extend([
        "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
    ]);
    ca.extend(["-subj", "/CN=netd-dial-test-ca"]);
    openssl(dir, &ca);
    let subject = format!("/CN={dns_name}");
    let mut csr = vec!["req", "-new", "-config", "openssl.cnf"];
    csr.extend(ec);
    csr.extend([
        "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj", &subject,
    ]);
    openssl(dir, &csr);
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "tls.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "2",
            "-days",
            "1",
            "-extfile",
            "openssl.cnf",
            "-extensions",
            "leaf",
            "-out",
            "tls.crt",
        ],
    );
}

/// Creates a ConfigMap labelled `route` (which selects the webhook called); kubectl's stderr
/// when refused.
fn create_configmap(g: &Ground, ns: &str, name: &str, route: &str) -> Result<(), String> {
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{netd-dial-test: {route}}}\n"
    );
    let out = g.kubectl(&["create", "-f", "-"], Some(&yaml));
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_api_server_calls_webhooks_behind_services_through_netd() {
    let g = Ground::connect();
    let namespace = g.namespace("netd-dial");
    let ns = namespace.name.as_str();
    let dir: PathBuf =
        std::env::temp_dir().join(format!("netd-webhook-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    certificates(&other, &format!("webhook.{ns}.svc"));
    certificates(&dir, &format!("webhook.{ns}.svc"));
    let ca_bundle = |dir: &Path| {
        serde_json::to_string(&ByteString(std::fs::read(dir.join("ca.crt")).unwrap())).unwrap()
    };
    let (other_ca, ca_bundle) = (ca_bundle(&other), ca_bundle(&dir));

    // The server inside the ground, on its gateway address.
    let gateway = NetConfig::ground().gateway.to_string();
    let path = |f: &str| dir.join(f).display().to_string();
    let mut server = g.spawn_inside(
        "python3",
        &["-c", SERVER, &gateway, &path("tls.crt"), &path("tls.key")],
        &[],
    );
    server.wait_for_log("listening on port ", Duration::from_secs(20));
    let port: u16 = server
        .log()
        .split("listening on port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .expect("the server's port");

    let _cleanup = Cleanup(
        &g,
        vec![
            format!("validatingwebhookconfiguration/{CONFIG}"),
            format!("customresourcedefinition/dialtests.{GROUP}"),
        ],
    );
    // `webhook` and `alias` lead to the server; `idle` has no endpoint; `absent` does not exist.
    g.apply(
        ns,
        &format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: webhook}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: webhook-manual
  labels: {{kubernetes.io/service-name: webhook, endpointslice.kubernetes.io/managed-by: netd-dial-test}}
addressType: IPv4
ports: [{{name: https, port: {port}, protocol: TCP}}]
endpoints:
- addresses: ["{gateway}"]
  conditions: {{ready: true}}
---
apiVersion: v1
kind: Service
metadata: {{name: idle}}
spec:
  ports: [{{name: https, port: 443}}]
---
apiVersion: v1
kind: Service
metadata: {{name: alias}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: alias-manual
  labels: {{kubernetes.io/service-name: alias, endpointslice.kubernetes.io/managed-by: netd-dial-test}}
addressType: IPv4
ports: [{{name: https, port: {port}, protocol: TCP}}]
endpoints:
- addresses: ["{gateway}"]
  conditions: {{ready: true}}
"#
        ),
    );
    let hook = |name: &str, service: &str, ca_bundle: &str| {
        format!(
            r#"
- name: {name}.{GROUP}
  clientConfig:
    service: {{namespace: {ns}, name: {service}, path: /validate, port: 443}}
    caBundle: {ca_bundle}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}
  objectSelector: {{matchLabels: {{netd-dial-test: {name}}}}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 10"#
        )
    };
    g.apply(
        ns,
        &format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: {CONFIG}}}\nwebhooks:{}{}{}{}{}\n",
            hook("deny", "webhook", &ca_bundle),
            hook("idle", "idle", &ca_bundle),
            hook("absent", "absent", &ca_bundle),
            // the CA of another server
            hook("untrusted", "webhook", &other_ca),
            // a name the certificate does not hold
            hook("misnamed", "alias", &ca_bundle),
        ),
    );

    // Until the API server has the configuration and netd the Service, creates pass or fail
    // otherwise; then the webhook denies.
    let deadline = Instant::now() + Duration::from_secs(60);
    let denied = loop {
        match create_configmap(&g, ns, "denied-probe", "deny") {
            Err(e) if e.contains("denied the request") => break e,
            Ok(()) => {
                g.ok(&["delete", "configmap", "-n", ns, "denied-probe"]);
            }
            Err(_) => {}
        }
        assert!(
            Instant::now() < deadline,
            "the webhook never denied; server log:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        denied.contains(&format!(
            "admission webhook \"deny.{GROUP}\" denied the request: the test webhook denies denied-probe"
        )),
        "{denied}"
    );
    create_configmap(&g, ns, "allowed", "deny").expect("allowed by the webhook");
    let log = server.log();
    assert_eq!(
        log.matches("served /validate").count(),
        2,
        "one review per create after the webhook took effect:\n{log}"
    );

    // No endpoint, no Service: the call fails at once, naming the Service (failurePolicy Fail).
    for (route, service, why) in [
        ("idle", "idle", "has no ready endpoints"),
        ("absent", "absent", "no such Service"),
    ] {
        let started = Instant::now();
        let err = create_configmap(&g, ns, &format!("to-{route}"), route).unwrap_err();
        let took = started.elapsed();
        for want in [
            format!("failed calling webhook \"{route}.{GROUP}\""),
            format!("{service}.{ns}.svc:443"),
            why.to_string(),
            format!("Service {ns}/{service}"),
        ] {
            assert!(err.contains(&want), "{route}: no {want:?} in {err}");
        }
        assert!(
            took < Duration::from_secs(5),
            "{route}: {took:?}, not at once"
        );
    }

    // TLS is the API server's own, end to end: the caBundle and the server name
    // `<service>.<namespace>.svc` are checked.
    for (route, why) in [
        (
            "untrusted",
            "x509: certificate signed by unknown authority".to_string(),
        ),
        (
            "misnamed",
            format!("x509: certificate is valid for webhook.{ns}.svc, not alias.{ns}.svc"),
        ),
    ] {
        let err = create_configmap(&g, ns, &format!("to-{route}"), route).unwrap_err();
        assert!(err.contains(&why), "{route}: no {why:?} in {err}");
    }
    assert_eq!(server.log().matches("served /validate").count(), 2);

    // A CRD's conversion webhook behind the same Service: v1 is stored, v2 read through it.
    let version = |v: &str| {
        format!(
            r#"
  - name: {v}
    served: true
    storage: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer}}
              convertedBy: {{type: string}}"#,
            v == "v1"
        )
    };
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: dialtests.{GROUP}}}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: dialtests, singular: dialtest, kind: DialTest, listKind: DialTestList}}
  versions:{}{}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {{namespace: {ns}, name: webhook, path: /convert, port: 443}}
        caBundle: {ca_bundle}
"#,
        version("v1"),
        version("v2"),
    );
    g.apply(ns, &crd);
    g.ok(&[
        "wait",
        "--for=condition=Established",
        &format!("customresourcedefinition/dialtests.{GROUP}"),
        "--timeout=30s",
    ]);
    let sample = format!(
        "apiVersion: {GROUP}/v1\nkind: DialTest\nmetadata: {{name: sample, namespace: {ns}}}\nspec: {{size: 3}}\n"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !g
        .kubectl(&["create", "-f", "-"], Some(&sample))
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "DialTest not created");
        std::thread::sleep(Duration::from_millis(300));
    }
    let read = g.ok(&[
        "get",
        "-n",
        ns,
        &format!("dialtests.v2.{GROUP}"),
        "sample",
        "-o",
        "jsonpath={.apiVersion} {.spec.size} {.spec.convertedBy}",
    ]);
    assert_eq!(read, format!("{GROUP}/v2 3 the test webhook"));
    assert!(server.log().contains("served /convert"), "{}", server.log());

    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
