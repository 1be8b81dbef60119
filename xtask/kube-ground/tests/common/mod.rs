//! Shared setup of the runtime and network tests: a runtime, a network and an image of the tests'
//! own, apart from the ground's (other store, namespace names and owner label), so that the tests
//! neither see nor clean up a running ground.
//!
//! These tests need root, podman, runc and iproute2, and fail (never skip) without them.

#![allow(dead_code)] // each test binary uses a part

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube_ground::net::{IpPool, NetConfig, Network};
use kube_ground::runtime::log::{self, LogLine};
use kube_ground::runtime::{ContainerRef, ContainerSpec, PodRef, Runtime, RuntimeConfig};

/// The tests' image: busybox from Debian's busybox-static, with an ENTRYPOINT and a CMD to check
/// Kubernetes' command/args semantics against.
pub const IMAGE: &str = "localhost/kube-ground-test:busybox";
const CACHE: &str = "/var/cache/slurm-dev/kube-test";

pub fn net_config() -> NetConfig {
    NetConfig {
        ground_netns: "slurm-dev-kubetest".into(),
        bridge: "kube0".into(),
        gateway: Ipv4Addr::new(10, 244, 0, 1),
        prefix_len: 16,
        pool: IpPool {
            first: Ipv4Addr::new(10, 244, 0, 2),
            last: Ipv4Addr::new(10, 244, 255, 254),
        },
        sandbox_prefix: "kubetest-".into(),
        state_dir: "/var/lib/slurm-dev/kube-test/net".into(),
    }
}

pub fn network() -> Network {
    require_root();
    Network::new(net_config())
}

pub fn require_root() {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .expect("running id -u");
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "these tests create network namespaces and containers: run them as root"
    );
}

/// The tests' runtime, with [`IMAGE`] in its store.
pub async fn runtime() -> Runtime {
    require_root();
    let rt = Runtime::new(RuntimeConfig::under(
        Path::new("/var/lib/slurm-dev/kube-test"),
        Path::new("/run/slurm-dev/kube-test"),
        "slurm-dev-kube-test",
    ))
    .await
    .expect("setting up podman (apt-get install -y podman runc)");
    static IMAGE_BUILT: tokio::sync::Mutex<bool> = tokio::sync::Mutex::const_new(false);
    let mut built = IMAGE_BUILT.lock().await;
    if !*built {
        if !rt.image_exists(IMAGE).await.unwrap() {
            build_image(&rt).await;
        }
        *built = true;
    }
    rt
}

async fn build_image(rt: &Runtime) {
    let cache = Path::new(CACHE);
    std::fs::create_dir_all(cache).unwrap();
    let deb = busybox_deb(cache);
    let work = cache.join(format!("image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let root = work.join("root");
    std::fs::create_dir_all(&work).unwrap();
    run(Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(work.join("deb")));
    for dir in ["bin", "etc", "tmp", "root", "proc", "sys", "dev"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let busybox = root.join("bin/busybox");
    std::fs::copy(work.join("deb/bin/busybox"), &busybox).unwrap();
    let list = run(Command::new(&busybox).arg("--list"));
    for applet in list.lines().filter(|a| *a != "busybox") {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n").unwrap();
    let tar = work.join("rootfs.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg("."));
    rt.import_rootfs(
        &tar,
        IMAGE,
        &[
            r#"ENTRYPOINT ["/bin/echo", "image-entrypoint"]"#,
            r#"CMD ["image-cmd"]"#,
            "ENV PATH=/bin",
        ],
    )
    .await
    .unwrap();
    std::fs::remove_dir_all(&work).unwrap();
}

fn busybox_deb(cache: &Path) -> PathBuf {
    let find = || {
        std::fs::read_dir(cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("busybox-static_")
            })
    };
    if let Some(deb) = find() {
        return deb;
    }
    run(Command::new("apt-get")
        .args(["download", "-q", "busybox-static"])
        .current_dir(cache));
    find().expect("apt-get download busybox-static wrote no .deb")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A pod with a random UID, as the API server gives.
pub fn pod(name: &str) -> PodRef {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").unwrap(),
        &mut bytes,
    )
    .unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    PodRef {
        namespace: "test".into(),
        name: name.into(),
        uid: format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ),
    }
}

pub fn container(pod: &PodRef, name: &str) -> ContainerRef {
    ContainerRef {
        pod: pod.clone(),
        container: name.into(),
        attempt: 0,
    }
}

/// A spec running `script` under `sh -c` in the test image.
pub fn shell(script: &str) -> ContainerSpec {
    ContainerSpec {
        image: IMAGE.into(),
        command: vec!["/bin/sh".into(), "-c".into()],
        args: vec![script.into()],
        ..Default::default()
    }
}

pub async fn log_lines(rt: &Runtime, id: &ContainerRef) -> Vec<LogLine> {
    rt.logs(id).await.unwrap()
}

pub async fn stdout(rt: &Runtime, id: &ContainerRef) -> Vec<String> {
    log_lines(rt, id)
        .await
        .into_iter()
        .filter(|l| l.stream == log::Stream::Stdout)
        .map(|l| l.text)
        .collect()
}

/// Waits until the container's log has a line `text`; returns how long that took.
pub async fn wait_for_line(rt: &Runtime, id: &ContainerRef, text: &str) -> Duration {
    let start = Instant::now();
    loop {
        if log_lines(rt, id).await.iter().any(|l| l.text == text) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{id} wrote no line {text:?}; log: {:?}",
            log_lines(rt, id).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs the tests' podman directly, for what the runtime has no call for.
pub fn podman(args: &[&str]) -> String {
    run(Command::new("podman")
        .args(args)
        .env(
            "CONTAINERS_CONF",
            "/var/lib/slurm-dev/kube-test/podman/containers.conf",
        )
        .env(
            "CONTAINERS_STORAGE_CONF",
            "/var/lib/slurm-dev/kube-test/podman/storage.conf",
        ))
}
