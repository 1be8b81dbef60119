package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// podman runs the ground's podman, with its private configuration, as the Rust runtime does
// (kube-ground/src/runtime/podman.rs).
type podman struct {
	containersConf, storageConf, owner string
}

func (p podman) command(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONTAINER_HOST=") && !strings.HasPrefix(kv, "CONTAINER_CONNECTION=") && !strings.HasPrefix(kv, "CONTAINERS_REGISTRIES_CONF=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "CONTAINERS_CONF="+p.containersConf, "CONTAINERS_STORAGE_CONF="+p.storageConf)
	return cmd
}

// ctr is one run of a pod's container, named by the test kubelet k8s_<container>_<pod>_<ns>_<uid>_<attempt>.
type ctr struct {
	name      string
	container string
	uid       string
	attempt   int
	running   bool
	pid       int
}

// containers lists the runs of the pod's containers (of container only, unless empty), newest
// attempt first.
func (p podman) containers(ns, pod, container string) ([]ctr, error) {
	args := []string{"ps", "--all", "--format=json",
		"--filter=label=io.slurm-dev.kube-ground=" + p.owner,
		"--filter=label=io.kubernetes.pod.namespace=" + ns,
		"--filter=label=io.kubernetes.pod.name=" + pod}
	if container != "" {
		args = append(args, "--filter=label=io.kubernetes.container.name="+container)
	}
	cmd := p.command(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("podman ps: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var listed []struct {
		Names  []string
		Labels map[string]string
		State  string
		Pid    int
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		return nil, fmt.Errorf("parsing podman ps: %w", err)
	}
	var found []ctr
	for _, l := range listed {
		attempt, _ := strconv.Atoi(l.Labels["io.kubernetes.container.attempt"])
		name := ""
		if len(l.Names) > 0 {
			name = l.Names[0]
		}
		found = append(found, ctr{name: name, container: l.Labels["io.kubernetes.container.name"],
			uid: l.Labels["io.kubernetes.pod.uid"], attempt: attempt, running: l.State == "running", pid: l.Pid})
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].attempt > found[j].attempt })
	return found, nil
}

// running is the container's running run, or an error that says why there is none.
func (p podman) running(ns, pod, container string) (ctr, error) {
	runs, err := p.containers(ns, pod, container)
	if err != nil {
		return ctr{}, err
	}
	for _, c := range runs {
		if c.running {
			return c, nil
		}
	}
	if container == "" {
		return ctr{}, fmt.Errorf("pod %s/%s has no running container", ns, pod)
	}
	return ctr{}, fmt.Errorf("container %s in pod %s/%s is not running", container, ns, pod)
}
