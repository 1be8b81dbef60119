//! The container runtime against real podman and runc (root required; see `common`).

use crate::common;

use std::time::{Duration, Instant};

use common::{container, pod, runtime, shell, stdout, wait_for_line};
use kube_ground::runtime::log::Stream;
use kube_ground::runtime::{ContainerSpec, Mount, State};

#[tokio::test]
async fn a_command_runs_and_its_exit_code_and_output_come_back() {
    let rt = runtime().await;
    let id = container(&pod("exit-code"), "main");
    let start = Instant::now();
    rt.start(&id, &shell("echo first; echo oops >&2; exit 7"))
        .await
        .unwrap();
    let first = wait_for_line(&rt, &id, "first").await;
    eprintln!("timing: podman run to first output: {:?}", start.elapsed());
    assert_eq!(rt.wait(&id).await.unwrap(), 7);
    eprintln!(
        "timing: podman run to exit code: {:?} (first line after {first:?})",
        start.elapsed()
    );

    let lines = common::log_lines(&rt, &id).await;
    let got: Vec<_> = lines.iter().map(|l| (l.stream, l.text.as_str())).collect();
    assert_eq!(got, [(Stream::Stdout, "first"), (Stream::Stderr, "oops")]);
    let status = rt.status(&id).await.unwrap().unwrap();
    assert_eq!((status.state, status.exit_code), (State::Exited, 7));
    assert!(status.started_at.is_some() && status.finished_at.is_some());

    let again = format!("{:#}", rt.start(&id, &shell("true")).await.unwrap_err());
    assert!(again.contains("already in use"), "{again}");
    assert_eq!(rt.status(&id).await.unwrap().unwrap().exit_code, 7);

    let listed = rt.list().await.unwrap();
    let mine = listed
        .iter()
        .find(|c| c.id.as_ref() == Some(&id))
        .expect("the container is listed with its pod labels");
    assert_eq!((mine.state, mine.exit_code), (State::Exited, 7));

    rt.remove(&id).await.unwrap();
    rt.remove(&id).await.unwrap();
    assert_eq!(rt.status(&id).await.unwrap(), None);
}

#[tokio::test]
async fn command_and_args_replace_entrypoint_and_cmd_as_in_kubernetes() {
    let rt = runtime().await;
    let p = pod("command-args");
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // (command, args, output): the image has ENTRYPOINT ["/bin/echo", "image-entrypoint"] and
    // CMD ["image-cmd"].
    let cases = [
        (vec![], vec![], "image-entrypoint image-cmd"),
        (vec![], s(&["a", "-n"]), "image-entrypoint a -n"),
        (s(&["/bin/echo", "c"]), vec![], "c"),
        (s(&["/bin/echo", "c"]), s(&["a b"]), "c a b"),
    ];
    for (i, (command, args, want)) in cases.into_iter().enumerate() {
        let id = container(&p, &format!("c{i}"));
        let spec = ContainerSpec {
            image: common::IMAGE.into(),
            command: command.clone(),
            args: args.clone(),
            ..Default::default()
        };
        rt.start(&id, &spec).await.unwrap();
        assert_eq!(rt.wait(&id).await.unwrap(), 0);
        assert_eq!(
            stdout(&rt, &id).await,
            [want],
            "command {command:?} args {args:?}"
        );
    }
    assert_eq!(rt.remove_pod(&p).await.unwrap(), 4);
}

#[tokio::test]
async fn env_mounts_user_and_files_are_visible_inside() {
    let rt = runtime().await;
    let p = pod("env-mounts");
    let dir = std::env::temp_dir().join(format!("kube-ground-test-{}", p.uid));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data"), "from-the-host\n").unwrap();
    std::fs::write(
        dir.join("hosts"),
        "10.244.9.9 peer.test.svc.cluster.local\n",
    )
    .unwrap();
    std::fs::write(dir.join("resolv.conf"), "nameserver 10.96.0.10\n").unwrap();
    let script = "echo \"$GREETING\"; cat /config/data; \
        if echo x 2>/dev/null >/config/data; then echo writable; else echo read-only; fi; \
        id -u; id -g; id -G; pwd; hostname; cat /etc/hosts /etc/resolv.conf";
    let spec = ContainerSpec {
        env: vec![("GREETING".into(), "hello world=1".into())],
        mounts: vec![Mount {
            host_path: dir.join("data"),
            container_path: "/config/data".into(),
            read_only: true,
        }],
        user: Some(1000),
        group: Some(2000),
        supplemental_groups: vec![3000],
        working_dir: Some("/tmp".into()),
        hostname: Some("web-0".into()),
        hosts_file: Some(dir.join("hosts")),
        resolv_conf: Some(dir.join("resolv.conf")),
        ..shell(script)
    };
    let id = container(&p, "main");
    rt.start(&id, &spec).await.unwrap();
    assert_eq!(rt.wait(&id).await.unwrap(), 0);
    assert_eq!(
        stdout(&rt, &id).await,
        [
            "hello world=1",
            "from-the-host",
            "read-only",
            "1000",
            "2000",
            "2000 3000",
            "/tmp",
            "web-0",
            "10.244.9.9 peer.test.svc.cluster.local",
            "nameserver 10.96.0.10",
        ]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("data")).unwrap(),
        "from-the-host\n"
    );
    rt.remove(&id).await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn capabilities_default_as_on_kubernetes_and_can_be_added_and_dropped() {
    let rt = runtime().await;
    let p = pod("caps");
    let script = "grep CapEff /proc/self/status; \
        if ip addr add 127.0.0.2/8 dev lo 2>/dev/null; then echo net-admin; else echo no-net-admin; fi; \
        if touch /x 2>/dev/null; then echo rw-root; else echo ro-root; fi";
    let cases = [
        (
            ContainerSpec::default(),
            ["CapEff:\t00000000a80425fb", "no-net-admin", "rw-root"],
        ),
        (
            ContainerSpec {
                cap_add: vec!["NET_ADMIN".into()],
                cap_drop: vec!["ALL".into()],
                read_only_root_fs: true,
                ..Default::default()
            },
            ["CapEff:\t0000000000001000", "net-admin", "ro-root"],
        ),
    ];
    for (i, (extra, want)) in cases.into_iter().enumerate() {
        let id = container(&p, &format!("c{i}"));
        let spec = ContainerSpec {
            cap_add: extra.cap_add,
            cap_drop: extra.cap_drop,
            read_only_root_fs: extra.read_only_root_fs,
            ..shell(script)
        };
        rt.start(&id, &spec).await.unwrap();
        assert_eq!(rt.wait(&id).await.unwrap(), 0);
        assert_eq!(stdout(&rt, &id).await, want);
    }
    rt.remove_pod(&p).await.unwrap();
}

#[tokio::test]
async fn stop_sends_term_then_kill_after_the_grace_period() {
    let rt = runtime().await;
    let p = pod("stop");
    // `sh` as the container's first process ignores TERM unless it traps it, like any PID 1.
    let stubborn = container(&p, "ignores-term");
    rt.start(
        &stubborn,
        &shell("trap '' TERM; echo ready; while :; do sleep 1; done"),
    )
    .await
    .unwrap();
    let polite = container(&p, "exits-on-term");
    rt.start(
        &polite,
        &shell("trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.1; done"),
    )
    .await
    .unwrap();
    wait_for_line(&rt, &stubborn, "ready").await;
    wait_for_line(&rt, &polite, "ready").await;

    let start = Instant::now();
    rt.stop(&stubborn, Duration::from_secs(2)).await.unwrap();
    let took = start.elapsed();
    eprintln!("timing: stop of a TERM-ignoring container with 2 s grace: {took:?}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert_eq!(rt.wait(&stubborn).await.unwrap(), 137);

    let start = Instant::now();
    rt.stop(&polite, Duration::from_secs(30)).await.unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(rt.wait(&polite).await.unwrap(), 3);
    assert_eq!(stdout(&rt, &polite).await, ["ready", "got-term"]);

    // Stopping what has exited, or never existed, is fine.
    rt.stop(&polite, Duration::from_secs(1)).await.unwrap();
    rt.stop(&container(&p, "never"), Duration::from_secs(1))
        .await
        .unwrap();
    rt.remove_pod(&p).await.unwrap();
}

#[tokio::test]
async fn signal_reaches_the_first_process() {
    let rt = runtime().await;
    let id = container(&pod("signal"), "main");
    rt.start(
        &id,
        &shell("trap 'exit 9' HUP; echo ready; while :; do sleep 0.1; done"),
    )
    .await
    .unwrap();
    wait_for_line(&rt, &id, "ready").await;
    rt.signal(&id, "HUP").await.unwrap();
    assert_eq!(rt.wait(&id).await.unwrap(), 9);
    rt.remove(&id).await.unwrap();
}

#[tokio::test]
async fn exec_returns_output_and_exit_code() {
    let rt = runtime().await;
    let id = container(&pod("exec"), "main");
    let spec = ContainerSpec {
        env: vec![("FROM_SPEC".into(), "yes".into())],
        ..shell("echo ready; exec sleep 60")
    };
    rt.start(&id, &spec).await.unwrap();
    wait_for_line(&rt, &id, "ready").await;
    let cmd = |s: &str| vec!["/bin/sh".to_owned(), "-c".to_owned(), s.to_owned()];
    let start = Instant::now();
    let out = rt
        .exec(&id, &cmd("echo out $FROM_SPEC; echo err >&2; exit 4"))
        .await
        .unwrap();
    eprintln!("timing: exec: {:?}", start.elapsed());
    assert_eq!(
        (out.exit_code, out.stdout.as_str(), out.stderr.as_str()),
        (4, "out yes\n", "err\n")
    );
    let missing = rt.exec(&id, &["/no/such".to_owned()]).await.unwrap();
    assert_eq!(missing.exit_code, 127, "{missing:?}");

    rt.remove(&id).await.unwrap();
    let err = rt.exec(&id, &cmd("true")).await.unwrap_err().to_string();
    assert!(
        err.contains("\"main\"")
            && err.contains("pod test/exec")
            && err.contains("no such container"),
        "{err}"
    );
}

#[tokio::test]
async fn a_container_that_cannot_start_is_an_error_naming_it() {
    let rt = runtime().await;
    let id = container(&pod("no-image"), "main");
    let spec = ContainerSpec {
        image: "localhost/kube-ground-test:no-such-tag".into(),
        ..Default::default()
    };
    let err = format!("{:#}", rt.start(&id, &spec).await.unwrap_err());
    assert!(
        err.contains("\"main\"")
            && err.contains("pod test/no-image")
            && err.contains("no-such-tag"),
        "{err}"
    );
    assert!(!rt.image_exists(&spec.image).await.unwrap());

    let id = container(&pod("no-binary"), "main");
    let spec = ContainerSpec {
        command: vec!["/no/such/binary".into()],
        ..shell("")
    };
    let spec = ContainerSpec {
        env: vec![("PASSWORD".into(), "from-a-secret".into())],
        ..spec
    };
    let err = format!("{:#}", rt.start(&id, &spec).await.unwrap_err());
    assert!(err.contains("/no/such/binary"), "{err}");
    assert!(
        err.contains("--env=PASSWORD=…") && !err.contains("from-a-secret"),
        "{err}"
    );
    // Removed again, so the kubelet can retry the same attempt.
    assert_eq!(rt.status(&id).await.unwrap(), None);
}

#[tokio::test]
async fn an_oci_archive_loads_under_its_name() {
    let rt = runtime().await;
    let name = "localhost/kube-ground-test:archived";
    rt.tag_image(common::IMAGE, name).await.unwrap();
    let archive = std::env::temp_dir().join(format!("kube-ground-test-{}.tar", std::process::id()));
    let _ = std::fs::remove_file(&archive);
    common::podman(&[
        "save",
        "--format=oci-archive",
        "--output",
        archive.to_str().unwrap(),
        name,
    ]);
    common::podman(&["rmi", name]);
    assert!(!rt.image_exists(name).await.unwrap());

    let start = Instant::now();
    let loaded = rt.load_image(&archive).await.unwrap();
    eprintln!(
        "timing: podman load of a 2 MB OCI archive: {:?}",
        start.elapsed()
    );
    assert_eq!(loaded, [name]);
    assert!(rt.image_exists(name).await.unwrap());
    std::fs::remove_file(&archive).unwrap();
    common::podman(&["rmi", name]);

    let err = format!("{:#}", rt.load_image(&archive).await.unwrap_err());
    assert!(err.contains(archive.to_str().unwrap()), "{err}");
}
