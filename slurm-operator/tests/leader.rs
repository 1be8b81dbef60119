//! Leader election: two operators with `--leader-elect` share Lease `slurm-operator`; only the
//! holder acts (a Token's Secret is minted once). When the leader dies the other takes over once
//! the Lease expires; when it is stopped (SIGTERM) it releases the Lease and the other leads
//! within 2 s; when its API traffic is black-holed it stops by its own clock before the Lease
//! can pass, and the other leads after the Lease expires.

use crate::common;

use std::time::{Duration, Instant};

use common::{OPERATOR, TestEnv, ground};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use test_support::ground::{ApiProxy, InsideProcess};

const LIMIT: Duration = Duration::from_secs(60);
/// The binaries' lease duration and renew deadline (`kube_support::leader::Timings`).
const LEASE: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);

fn operator(env: &TestEnv, identity: &str, proxy: Option<&ApiProxy>) -> InsideProcess {
    let args = [
        "run",
        "--namespaces",
        env.name(),
        "--leader-elect",
        "--leader-elect-namespace",
        env.name(),
        "--health-addr",
        "0",
        "--metrics-addr",
        "0",
        "--webhook-addr",
        "0",
    ];
    let kubeconfig = proxy.map(|p| p.kubeconfig().to_string_lossy().into_owned());
    let mut vars = vec![("POD_NAME", identity), ("RUST_LOG", "info")];
    if let Some(k) = &kubeconfig {
        vars.push(("KUBECONFIG", k));
    }
    ground().spawn_inside(OPERATOR, &args, &vars)
}

fn holder(env: &TestEnv) -> String {
    ground().get(env.name(), "lease/slurm-operator", "{.spec.holderIdentity}")
}

/// A time field of the Lease (`renewTime`, `acquireTime`).
fn lease_time(env: &TestEnv, field: &str) -> Timestamp {
    let text = ground().get(
        env.name(),
        "lease/slurm-operator",
        &format!("{{.spec.{field}}}"),
    );
    text.parse()
        .unwrap_or_else(|e| panic!("lease {field} {text:?}: {e}"))
}

/// Waits until `first` (op-a) leads, then starts the standby with `second` and waits until it
/// waits. Started together, either could win the Lease (a clean clone's CI run saw op-b, started
/// second but not behind the test's proxy, win it).
fn leader_then_standby(
    env: &TestEnv,
    first: &mut InsideProcess,
    second: impl FnOnce() -> InsideProcess,
) -> InsideProcess {
    first.wait_for_log(" leading", LIMIT);
    env.wait_for(
        "lease/slurm-operator",
        "{.spec.holderIdentity}",
        LIMIT,
        |h| h == "op-a",
    );
    let mut standby = second();
    standby.wait_for_log("waiting for leadership", LIMIT);
    standby
}

/// A Token whose Secret only a leader mints.
fn token_is_served(env: &TestEnv) {
    ground().apply(
        env.name(),
        "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata:\n  name: t\nspec:\n  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}\n  username: slurm\n",
    );
    env.wait_for("secret/t-jwt-slurm", "{.data.SLURM_JWT}", LIMIT, |v| {
        !v.is_empty()
    });
}

/// The leader acts: a deleted Token Secret comes back.
fn a_leader_acts(env: &TestEnv) {
    ground().ok(&["delete", "-n", env.name(), "secret/t-jwt-slurm"]);
    env.wait_for("secret/t-jwt-slurm", "{.data.SLURM_JWT}", LIMIT, |v| {
        !v.is_empty()
    });
}

#[test]
fn only_the_lease_holder_acts_and_the_other_takes_over() {
    let env = TestEnv::new("op-leader");
    let mut a = operator(&env, "op-a", None);
    let mut b = operator(&env, "op-b", None);
    let first = env.wait_for(
        "lease/slurm-operator",
        "{.spec.holderIdentity}",
        LIMIT,
        |h| h == "op-a" || h == "op-b",
    );
    token_is_served(&env);
    let (leader, follower) = if first == "op-a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    assert!(
        follower.log().contains("waiting for leadership") && !follower.log().contains("leading"),
        "the follower acts too:\n{}",
        follower.log()
    );

    leader.kill_now();
    let deadline = Instant::now() + LIMIT;
    while holder(&env) == first {
        assert!(
            Instant::now() < deadline,
            "the lease stayed with the dead {first}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    a_leader_acts(&env);
    assert!(follower.log().contains("leading"), "{}", follower.log());
}

#[test]
fn a_stopped_leader_releases_the_lease_and_the_standby_leads_within_two_seconds() {
    let env = TestEnv::new("op-release");
    let mut a = operator(&env, "op-a", None);
    let b = leader_then_standby(&env, &mut a, || operator(&env, "op-b", None));
    token_is_served(&env);

    let sigterm = Instant::now();
    // SIGTERM, then waits until it has exited.
    a.kill();
    let exited = sigterm.elapsed();
    let deadline = sigterm + LIMIT;
    while holder(&env) != "op-b" {
        assert!(Instant::now() < deadline, "op-b never took the lease");
        std::thread::sleep(Duration::from_millis(20));
    }
    let takeover = sigterm.elapsed();
    println!(
        "SIGTERM to the leader: it exited after {:.2} s, the standby held the Lease {:.2} s after the signal",
        exited.as_secs_f64(),
        takeover.as_secs_f64()
    );
    assert!(a.log().contains("released the Lease"), "{}", a.log());
    assert!(
        takeover < Duration::from_secs(2),
        "the standby took {takeover:?}:\n{}",
        b.log()
    );
    a_leader_acts(&env);
}

#[test]
fn a_leader_cut_off_from_the_api_server_stops_before_its_lease_can_pass() {
    let env = TestEnv::new("op-fence");
    let proxy = ground().api_proxy();
    let mut a = operator(&env, "op-a", Some(&proxy));
    // Kept until the end: the standby that takes over.
    let _standby = leader_then_standby(&env, &mut a, || operator(&env, "op-b", None));
    token_is_served(&env);

    // The leader's API traffic black-holed: connections stay open, no byte passes.
    let paused = Instant::now();
    proxy.pause();
    let exit = loop {
        if a.try_status().is_some() {
            break Timestamp::now();
        }
        assert!(
            paused.elapsed() < LEASE + Duration::from_secs(5),
            "the cut-off leader still runs:\n{}",
            a.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let stopped_after = paused.elapsed();
    // The last renewal the API server has (renewTime is written by the leader's clock, this
    // machine's too).
    let renewed = lease_time(&env, "renewTime");
    assert!(
        a.log().contains("leader fenced"),
        "no fencing message:\n{}",
        a.log()
    );
    let exit_after_renewal = exit.duration_since(renewed);
    assert!(
        exit_after_renewal
            < SignedDuration::try_from(RENEW_DEADLINE + Duration::from_secs(1)).unwrap(),
        "the leader exited {exit_after_renewal:?} after its last renewal:\n{}",
        a.log()
    );

    // The standby leads only once the Lease has expired, after the old leader was gone.
    env.wait_for(
        "lease/slurm-operator",
        "{.spec.holderIdentity}",
        LIMIT,
        |h| h == "op-b",
    );
    let acquired = lease_time(&env, "acquireTime");
    let takeover_after_renewal = acquired.duration_since(renewed);
    println!(
        "black-holed leader: exited {:.2} s after the pause, {:.2} s after its last renewal; the \
         standby took the Lease {:.2} s after that renewal ({:.2} s after the old leader's exit)",
        stopped_after.as_secs_f64(),
        exit_after_renewal.as_secs_f64(),
        takeover_after_renewal.as_secs_f64(),
        acquired.duration_since(exit).as_secs_f64()
    );
    assert!(
        takeover_after_renewal >= SignedDuration::try_from(LEASE).unwrap(),
        "the standby took the Lease {takeover_after_renewal:?} after the last renewal"
    );
    assert!(
        acquired > exit,
        "the standby led before the old leader exited"
    );

    // Full service: the new leader acts, and the old one, restarted as its pod would be with
    // its path to the API server back, waits as the standby.
    a_leader_acts(&env);
    proxy.resume();
    let before = a.log().len();
    a.restart();
    let deadline = Instant::now() + LIMIT;
    while !a.log()[before..].contains("waiting for leadership") {
        assert!(Instant::now() < deadline, "{}", a.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(!a.log()[before..].contains(" leading"), "{}", a.log());
    assert_eq!(holder(&env), "op-b");
}
