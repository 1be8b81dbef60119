//! Leader election: two operators with `--leader-elect` share Lease `slurm-operator`; only the
//! holder acts (a Token's Secret is minted once), and when it dies the other takes over.

use crate::common;

use std::time::{Duration, Instant};

use common::{OPERATOR, TestEnv, ground};
use test_support::ground::InsideProcess;

const LIMIT: Duration = Duration::from_secs(60);

fn operator(env: &TestEnv, identity: &str) -> InsideProcess {
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
    ground().spawn_inside(
        OPERATOR,
        &args,
        &[("POD_NAME", identity), ("RUST_LOG", "info")],
    )
}

fn holder(env: &TestEnv) -> String {
    ground().get(env.name(), "lease/slurm-operator", "{.spec.holderIdentity}")
}

#[test]
fn only_the_lease_holder_acts_and_the_other_takes_over() {
    let env = TestEnv::new("op-leader");
    let mut a = operator(&env, "op-a");
    let mut b = operator(&env, "op-b");
    let first = env.wait_for(
        "lease/slurm-operator",
        "{.spec.holderIdentity}",
        LIMIT,
        |h| h == "op-a" || h == "op-b",
    );
    ground().apply(
        env.name(),
        "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata:\n  name: t\nspec:\n  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}\n  username: slurm\n",
    );
    env.wait_for("secret/t-jwt-slurm", "{.data.SLURM_JWT}", LIMIT, |v| {
        !v.is_empty()
    });
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
    // The new leader acts: a deleted Token Secret comes back.
    ground().ok(&["delete", "-n", env.name(), "secret/t-jwt-slurm"]);
    env.wait_for("secret/t-jwt-slurm", "{.data.SLURM_JWT}", LIMIT, |v| {
        !v.is_empty()
    });
    assert!(follower.log().contains("leading"), "{}", follower.log());
}
