package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// portForwardProtocol is the kubelet's SPDY port-forward protocol (the API server tunnels
// WebSocket clients' SPDY to it).
const portForwardProtocol = "portforward.k8s.io"

// portForward serves /portForward/{ns}/{pod}: each pair of streams (error, data) with the same
// requestID is a connection to 127.0.0.1:<port> inside the pod's network namespace.
func (k *kubeletAPI) portForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	c, err := k.podman.running(ns, pod, "")
	if err != nil {
		failure(w, http.StatusBadRequest, "%v", err)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portForwardProtocol}); err != nil {
		return
	}
	streams := make(chan httpstream.Stream, 1)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(stream httpstream.Stream, replySent <-chan struct{}) error {
		streams <- stream
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(4 * time.Hour)
	type pair struct{ data, errorStream httpstream.Stream }
	pairs := map[string]*pair{}
	for {
		select {
		case <-conn.CloseChan():
			return
		case stream := <-streams:
			id := stream.Headers().Get(corev1.PortForwardRequestIDHeader)
			p := pairs[id]
			if p == nil {
				p = &pair{}
				pairs[id] = p
			}
			switch stream.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeData:
				p.data = stream
			case corev1.StreamTypeError:
				p.errorStream = stream
			default:
				stream.Reset()
				continue
			}
			if p.data != nil && p.errorStream != nil {
				delete(pairs, id)
				go func() {
					forward(c.pid, p.data, p.errorStream)
					conn.RemoveStreams(p.data, p.errorStream)
				}()
			}
		}
	}
}

func forward(pid int, data, errorStream httpstream.Stream) {
	defer errorStream.Close()
	defer data.Close()
	port, err := strconv.ParseUint(data.Headers().Get(corev1.PortHeader), 10, 16)
	if err != nil {
		fmt.Fprintf(errorStream, "invalid port %q", data.Headers().Get(corev1.PortHeader))
		return
	}
	target, err := dialInNetns(pid, int(port))
	if err != nil {
		fmt.Fprintf(errorStream, "error forwarding port %d to the pod: %v", port, err)
		return
	}
	defer target.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(target, data)
		if tcp, ok := target.(*net.TCPConn); ok {
			tcp.CloseWrite()
		}
		close(done)
	}()
	io.Copy(data, target)
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// dialInNetns connects to 127.0.0.1:port in the network namespace of process pid. The dialing
// thread enters that namespace and is never unlocked: it ends with its goroutine instead of going
// back to the scheduler in the pod's namespace.
func dialInNetns(pid, port int) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("entering the pod's network namespace: %w", err)}
			return
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}
