//! What the operator's integration tests share: the test ground (`cargo xtask kube up`), a
//! namespace per test with the Slurm key Secrets, the operator's CRDs, the operator binary started
//! inside the ground as if it ran in a pod, and Slurm commands run from a pod in the cluster.
//! The tests fail, never skip, when the ground is not up.

#![allow(dead_code)] // each test binary uses a part

pub mod end_state;
mod in_cluster;
pub mod workers;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine as _;

pub use in_cluster::run_in_cluster;
pub use test_support::ground::{Ground, InsideProcess, Namespace};

/// The operator, built by cargo for the integration tests.
pub const OPERATOR: &str = env!("CARGO_BIN_EXE_slurm-operator");

/// The binary [`TestEnv::start_operator`] runs: [`OPERATOR`], or `SLURM_OPERATOR_BIN` when set
/// (the bench compares another build this way).
pub fn operator_bin() -> String {
    std::env::var("SLURM_OPERATOR_BIN").unwrap_or_else(|_| OPERATOR.into())
}

/// The ground, one for the whole test binary.
pub fn ground() -> &'static Ground {
    Ground::shared()
}

/// `tests/manifests/<name>`.
pub fn manifest(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/manifests")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Where the CRDs are committed, relative to the crate: the templates of the CRD chart.
pub const CRD_DIR: &str = "charts/slurm-operator-crds/templates";

/// The committed CRDs (`charts/slurm-operator-crds/templates/*.yaml`, the CRD chart's templates),
/// sorted by name.
pub fn crd_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(CRD_DIR);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Applies the committed CRDs once per test binary and waits until they are established; false
/// while there are none yet.
pub fn apply_crds() -> bool {
    static APPLIED: OnceLock<bool> = OnceLock::new();
    *APPLIED.get_or_init(|| {
        let files = crd_files();
        if files.is_empty() {
            eprintln!("slurm-operator/{CRD_DIR}/*.yaml: none yet; the CRDs are not applied");
            return false;
        }
        let g = ground();
        for file in &files {
            let file = file.to_str().expect("a UTF-8 path");
            g.ok(&["apply", "--server-side", "--force-conflicts", "-f", file]);
        }
        for file in &files {
            let file = file.to_str().expect("a UTF-8 path");
            g.ok(&[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "-f",
                file,
            ]);
        }
        true
    })
}

/// One test's slice of the ground: a fresh namespace holding the Secrets a Slinky cluster needs,
/// the CRDs applied, and (once started) the operator watching that namespace. Dropping it stops
/// the operator, then deletes the namespace.
pub struct TestEnv {
    // Declared first: dropped before the namespace goes.
    operator: Option<InsideProcess>,
    pub ns: Namespace<'static>,
    /// The `slurm.key` in Secret `slurm-auth-slurm`.
    pub slurm_key: String,
    /// The `jwt.key` in Secret `slurm-auth-jwt`: HS256 key for tokens slurmrestd accepts.
    pub jwt_key: String,
}

impl TestEnv {
    /// Namespace `<prefix>-<pid>` (give every test its own prefix), the Secrets
    /// `slurm-auth-slurm`/`slurm.key` and `slurm-auth-jwt`/`jwt.key` (1024 random characters each,
    /// immutable, as Slinky's chart makes them) and the CRDs.
    pub fn new(prefix: &str) -> TestEnv {
        let g = ground();
        apply_crds();
        let ns = g.namespace(prefix);
        let env = TestEnv {
            operator: None,
            ns,
            slurm_key: random_key(),
            jwt_key: random_key(),
        };
        // `data`, not `stringData`: the ground's API server stores stringData as it comes.
        for (name, key, value) in [
            ("slurm-auth-slurm", "slurm.key", &env.slurm_key),
            ("slurm-auth-jwt", "jwt.key", &env.jwt_key),
        ] {
            let value = base64::engine::general_purpose::STANDARD.encode(value);
            g.apply(
                &env.ns.name,
                &format!(
                    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nimmutable: true\ndata:\n  {key}: {value}\n"
                ),
            );
        }
        env
    }

    pub fn name(&self) -> &str {
        &self.ns.name
    }

    pub fn ground(&self) -> &'static Ground {
        ground()
    }

    /// A JSON merge patch of `what` (e.g. `nodeset/slurm-worker-slinky`) in the namespace.
    pub fn merge_patch(&self, what: &str, json: &str) {
        ground().ok(&[
            "patch",
            "-n",
            &self.ns.name,
            what,
            "--type=merge",
            "-p",
            json,
        ]);
    }

    /// Applies `tests/manifests/<file>` in the namespace.
    pub fn apply_manifest(&self, file: &str) {
        ground().apply(&self.ns.name, &manifest(file));
    }

    /// Starts the operator inside the ground: `slurm-operator run --namespaces <ns> <extra…>`,
    /// KUBECONFIG pointing at the API server as 10.96.0.1:443, `RUST_LOG` from the test's
    /// environment or `info`. A second call restarts it. Its health and metrics listeners are off
    /// unless `extra_args` sets them: every process inside the ground shares one network
    /// namespace, so two operators on the default ports would collide.
    pub fn start_operator(&mut self, extra_args: &[&str]) -> &mut InsideProcess {
        if let Some(mut old) = self.operator.take() {
            old.kill();
        }
        let mut args = vec!["run", "--namespaces", &self.ns.name];
        for flag in ["--health-addr", "--metrics-addr"] {
            if !extra_args.iter().any(|a| a.starts_with(flag)) {
                args.extend([flag, "0"]);
            }
        }
        args.extend_from_slice(extra_args);
        let log = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
        let process = ground().spawn_inside(operator_bin(), &args, &[("RUST_LOG", &log)]);
        self.operator.insert(process)
    }

    /// The running operator; panics when [`TestEnv::start_operator`] was not called.
    pub fn operator(&mut self) -> &mut InsideProcess {
        self.operator.as_mut().expect("start_operator first")
    }

    /// [`run_in_cluster`] in this namespace.
    pub fn run_in_cluster(&self, controller: &str, command: &str) -> (i32, String) {
        run_in_cluster(&self.ns.name, controller, command)
    }

    /// Waits until `check` holds for a jsonpath of an object in the namespace (see
    /// [`Ground::wait_for`]); panics after `limit` with the object and the operator's log.
    pub fn wait_for(
        &self,
        what: &str,
        jsonpath: &str,
        limit: Duration,
        check: impl Fn(&str) -> bool,
    ) -> String {
        let wait = || ground().wait_for(&self.ns.name, what, jsonpath, limit, check);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(wait)) {
            Ok(v) => v,
            Err(panic) => {
                if let Some(op) = &self.operator {
                    eprintln!("operator log ({}):\n{}", op.log_path().display(), op.log());
                }
                std::panic::resume_unwind(panic)
            }
        }
    }
}

/// 1024 random alphanumeric characters, as the chart's `randAlphaNum 1024`.
fn random_key() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut raw = [0u8; 1024];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").expect("/dev/urandom"),
        &mut raw,
    )
    .expect("reading /dev/urandom");
    raw.iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}
