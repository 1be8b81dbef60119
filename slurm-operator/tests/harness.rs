//! The integration tests' harness alone, without the operator: a process started inside the
//! test ground reaches the API server as a pod does (10.96.0.1:443) and resolves Service names,
//! is killed with its whole process group, and restarts; the test namespace has its Secrets.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use test_support::ground::InsideProcess;

use common::{TestEnv, ground};

#[test]
fn a_process_inside_the_ground_reaches_the_api_server_and_resolves_services() {
    let env = TestEnv::new("op-harness-api");
    let g = ground();
    g.apply(
        env.name(),
        "apiVersion: v1\nkind: Service\nmetadata: {name: probe}\nspec: {ports: [{port: 80}]}\n",
    );
    let cluster_ip = g.wait_for(
        env.name(),
        "service/probe",
        "{.spec.clusterIP}",
        Duration::from_secs(10),
        |ip| ip.starts_with("10.96."),
    );

    let kubectl = g.kubectl_path();
    let mut get = g.spawn_inside(
        kubectl,
        &["get", "namespace", env.name(), "-o", "name", "-v=6"],
        &[],
    );
    let status = get.wait(Duration::from_secs(30));
    let log = get.log();
    assert!(status.success(), "kubectl inside: {status}\n{log}");
    assert!(log.contains(&format!("namespace/{}", env.name())), "{log}");
    assert!(
        log.contains("https://10.96.0.1:443/api/v1/namespaces/"),
        "kubectl did not go through 10.96.0.1:443:\n{log}"
    );

    // A pod's resolver: the short `<svc>.<ns>` form through the search list, and the full name.
    for (name, ip) in [
        (format!("probe.{}", env.name()), cluster_ip.as_str()),
        ("kubernetes.default.svc.cluster.local".into(), "10.96.0.1"),
    ] {
        let mut lookup = g.spawn_inside("getent", &["ahostsv4", &name], &[]);
        let status = lookup.wait(Duration::from_secs(20));
        let log = lookup.log();
        assert!(status.success(), "{name} did not resolve inside:\n{log}");
        assert!(
            log.contains(&format!("{ip} ")),
            "{name} is not {ip}:\n{log}"
        );
    }

    for (secret, key) in [
        ("slurm-auth-slurm", "slurm.key"),
        ("slurm-auth-jwt", "jwt.key"),
    ] {
        let value = g.get(
            env.name(),
            &format!("secret/{secret}"),
            &format!("{{.data.{}}}", key.replace('.', "\\.")),
        );
        // base64 of 1024 bytes
        assert_eq!(value.len(), 1368, "{secret}/{key}");
    }
}

#[test]
fn an_inside_process_is_killed_with_its_children_and_restarts() {
    let g = ground();
    // A shell that leaves a child behind: killing only the shell would orphan the sleep.
    let mut p = g.spawn_inside("sh", &["-c", "sleep 600 & echo child:$!; wait"], &[]);
    let first = wait_for_child(&mut p, 1);
    let first_shell = p.pid().unwrap();
    assert!(Path::new(&format!("/proc/{first}")).exists());

    p.restart();
    assert!(p.try_status().is_none(), "{}", p.log());
    assert_ne!(p.pid(), Some(first_shell));
    assert!(
        gone(first),
        "the first start's child {first} survived the restart"
    );
    let second = wait_for_child(&mut p, 2);
    assert_ne!(first, second);

    p.kill_now();
    assert!(gone(second), "the child {second} survived kill_now");
    assert_eq!(p.pid(), None);
}

/// The pid of the `n`th start's child, from the `child:<pid>` lines of the log.
fn wait_for_child(p: &mut InsideProcess, n: usize) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<u32> = p
            .log()
            .lines()
            .filter_map(|l| l.strip_prefix("child:")?.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids[n - 1];
        }
        assert!(p.try_status().is_none(), "exited early:\n{}", p.log());
        assert!(Instant::now() < deadline, "no child line {n}:\n{}", p.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `pid` has ended (gone, or a zombie not yet reaped by whoever inherited it), within 2 s.
fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s.rsplit_once(')')?.1.split_whitespace().next()?.to_owned()));
        if state.as_deref().is_none_or(|s| s == "Z") {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
