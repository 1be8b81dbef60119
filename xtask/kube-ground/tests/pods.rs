//! The test kubelet and the stand-in controllers against the running test ground
//! (`cargo xtask kube up`): pods run for real from OCI images.

use std::time::{Duration, Instant};

use test_support::ground::Ground;

const IMAGE: &str = "localhost/slurm-dev/toolbox:latest";

#[test]
fn configmap_file_and_secret_env_reach_the_container_and_the_exit_code_comes_back() {
    let g = Ground::connect();
    let ns = g.namespace("kg-files");
    g.apply(
        &ns.name,
        &format!(
            r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings}}
data: {{greeting: hello-from-configmap}}
---
apiVersion: v1
kind: Secret
metadata: {{name: creds}}
stringData: {{password: s3cret}}
---
apiVersion: v1
kind: Pod
metadata: {{name: ok}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: {IMAGE}
    command: [sh, -c, 'cat /etc/settings/greeting > /work/copy && echo "$(cat /work/copy) pw=$PASSWORD ns=$MY_NS"']
    env:
    - name: PASSWORD
      valueFrom: {{secretKeyRef: {{name: creds, key: password}}}}
    - name: MY_NS
      valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}
    volumeMounts:
    - {{name: settings, mountPath: /etc/settings}}
    - {{name: work, mountPath: /work}}
  volumes:
  - name: settings
    configMap: {{name: settings}}
  - name: work
    emptyDir: {{}}
---
apiVersion: v1
kind: Pod
metadata: {{name: fails}}
spec:
  restartPolicy: Never
  containers:
  - {{name: main, image: {IMAGE}, command: [sh, -c, 'exit 3']}}
"#
        ),
    );
    let limit = Duration::from_secs(60);
    g.wait_for(&ns.name, "pod/ok", "{.status.phase}", limit, |p| {
        p == "Succeeded"
    });
    let code = g.get(
        &ns.name,
        "pod/ok",
        "{.status.containerStatuses[0].state.terminated.exitCode}",
    );
    assert_eq!(code, "0");
    let log = g.log(&ns.name, "ok", "main");
    assert!(
        log.contains(&format!("hello-from-configmap pw=s3cret ns={}", ns.name)),
        "{log}"
    );
    g.wait_for(&ns.name, "pod/fails", "{.status.phase}", limit, |p| {
        p == "Failed"
    });
    let code = g.get(
        &ns.name,
        "pod/fails",
        "{.status.containerStatuses[0].state.terminated.exitCode}",
    );
    assert_eq!(code, "3");
}

#[test]
fn a_failing_readiness_probe_keeps_ready_false() {
    let g = Ground::connect();
    let ns = g.namespace("kg-ready");
    g.apply(
        &ns.name,
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: never-ready}}
spec:
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep, "3600"]
    readinessProbe:
      exec: {{command: [test, -e, /ready]}}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {{name: ready}}
spec:
  containers:
  - name: main
    image: {IMAGE}
    command: [sh, -c, 'touch /ready; exec sleep 3600']
    readinessProbe:
      exec: {{command: [test, -e, /ready]}}
      periodSeconds: 1
"#
        ),
    );
    let ready = r#"{.status.conditions[?(@.type=="Ready")].status}"#;
    let limit = Duration::from_secs(60);
    g.wait_for(&ns.name, "pod/ready", ready, limit, |s| s == "True");
    g.wait_for(&ns.name, "pod/never-ready", "{.status.phase}", limit, |p| {
        p == "Running"
    });
    // Several probe periods after it started.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(g.get(&ns.name, "pod/never-ready", ready), "False");
    assert_eq!(
        g.get(
            &ns.name,
            "pod/never-ready",
            "{.status.containerStatuses[0].ready}"
        ),
        "false"
    );
}

#[test]
fn deletion_sends_term_then_kill_after_the_grace_period() {
    let g = Ground::connect();
    let ns = g.namespace("kg-grace");
    let marks = std::env::temp_dir().join(format!("kg-grace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&marks);
    std::fs::create_dir_all(&marks).unwrap();
    g.apply(
        &ns.name,
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: stubborn}}
spec:
  terminationGracePeriodSeconds: 4
  containers:
  - name: main
    image: {IMAGE}
    command: [sh, -c, 'trap "echo TERM >> /marks/signals" TERM; echo started > /marks/started; while true; do sleep 0.2; done']
    volumeMounts: [{{name: marks, mountPath: /marks}}]
  volumes:
  - name: marks
    hostPath: {{path: {}, type: Directory}}
"#,
            marks.display()
        ),
    );
    let limit = Duration::from_secs(60);
    g.wait_for(&ns.name, "pod/stubborn", "{.status.phase}", limit, |p| {
        p == "Running"
    });
    let deadline = Instant::now() + limit;
    while !marks.join("started").exists() {
        assert!(Instant::now() < deadline, "the container never started");
        std::thread::sleep(Duration::from_millis(200));
    }
    let started = Instant::now();
    g.ok(&["delete", "-n", &ns.name, "pod/stubborn", "--wait=false"]);
    g.wait_for(&ns.name, "pod/stubborn", "{.metadata.name}", limit, |n| {
        n.is_empty()
    });
    let took = started.elapsed();
    let signals = std::fs::read_to_string(marks.join("signals")).unwrap_or_default();
    assert!(signals.contains("TERM"), "no SIGTERM seen: {signals:?}");
    // Killed only once the 4 s grace period was over (the shell ignores TERM).
    assert!(took >= Duration::from_secs(4), "removed after {took:?}");
    std::fs::remove_dir_all(&marks).unwrap();
}

#[test]
fn a_statefulset_of_three_makes_ordinal_pods_with_their_claims() {
    let g = Ground::connect();
    let ns = g.namespace("kg-sts");
    g.apply(
        &ns.name,
        &format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: x}}
spec:
  clusterIP: None
  selector: {{app: x}}
  ports: [{{port: 80}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: x}}
spec:
  serviceName: x
  replicas: 3
  selector: {{matchLabels: {{app: x}}}}
  template:
    metadata: {{labels: {{app: x}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {IMAGE}
        command: [sh, -c, 'hostname > /data/host; exec sleep 3600']
        volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}
"#
        ),
    );
    g.wait_for(
        &ns.name,
        "statefulset/x",
        "{.status.readyReplicas}",
        Duration::from_secs(120),
        |r| r == "3",
    );
    let pods = g.get(&ns.name, "pods", "{.items[*].metadata.name}");
    assert_eq!(pods, "x-0 x-1 x-2");
    let claims = g.get(&ns.name, "pvc", "{.items[*].metadata.name}");
    assert_eq!(claims, "data-x-0 data-x-1 data-x-2");
    let phases = g.get(&ns.name, "pvc", "{.items[*].status.phase}");
    assert_eq!(phases, "Bound Bound Bound");
    // Each claim's directory is named by the claim and its uid.
    for i in 0..3 {
        let claim = format!("data-x-{i}");
        let uid = g.get(&ns.name, &format!("pvc/{claim}"), "{.metadata.uid}");
        let host = std::fs::read_to_string(format!(
            "/var/lib/slurm-dev/kube/claims/{}/{claim}-{uid}/host",
            ns.name
        ))
        .unwrap();
        assert_eq!(host.trim(), format!("x-{i}"));
    }
}

#[test]
fn pods_reach_each_other_by_service_name_and_by_hostname_subdomain() {
    let g = Ground::connect();
    let ns = g.namespace("kg-dns");
    g.apply(
        &ns.name,
        &format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: sub}}
spec:
  clusterIP: None
  selector: {{app: srv}}
  ports: [{{port: 8080}}]
---
apiVersion: v1
kind: Service
metadata: {{name: srv-svc}}
spec:
  selector: {{app: srv}}
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: srv, labels: {{app: srv}}}}
spec:
  hostname: srv
  subdomain: sub
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {IMAGE}
    command: [sh, -c, 'while true; do echo "hello from $(hostname)" | nc -l -p 8080; done']
    readinessProbe:
      tcpSocket: {{port: 8080}}
      periodSeconds: 1
"#
        ),
    );
    let ready = r#"{.status.conditions[?(@.type=="Ready")].status}"#;
    g.wait_for(&ns.name, "pod/srv", ready, Duration::from_secs(60), |s| {
        s == "True"
    });
    g.apply(
        &ns.name,
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: {IMAGE}
    command: [sh, -c, 'for name in srv.sub:8080 srv-svc:80 srv-svc.{ns}.svc.cluster.local:80; do for try in 1 2 3 4 5; do out=$(nc -w 3 ${{name%:*}} ${{name#*:}} </dev/null) && [ -n "$out" ] && break; sleep 1; done; echo "$name: $out"; [ "$out" = "hello from srv" ] || exit 1; done']
"#,
            ns = ns.name
        ),
    );
    let phase = g.wait_for(
        &ns.name,
        "pod/client",
        "{.status.phase}",
        Duration::from_secs(90),
        |p| p == "Succeeded" || p == "Failed",
    );
    let log = g.log(&ns.name, "client", "main");
    assert_eq!(phase, "Succeeded", "{log}");
    assert!(log.contains("srv.sub:8080: hello from srv"), "{log}");
    assert!(log.contains("srv-svc:80: hello from srv"), "{log}");
}
