package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// exec serves /exec/{ns}/{pod}/{container}?command=…&input=1&output=1&error=1&tty=1 over SPDY
// (remote command protocol v4, the kubelet's; the API server translates WebSocket clients):
// `podman exec` in the container's running run, the exit code in the error stream.
func (k *kubeletAPI) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	command := q["command"]
	if len(command) == 0 {
		failure(w, http.StatusBadRequest, "you must specify at least 1 command")
		return
	}
	k.remoteCommand(w, r, func(c ctr, tty, stdin bool) *exec.Cmd {
		args := []string{"exec"}
		if stdin {
			args = append(args, "--interactive")
		}
		if tty {
			args = append(args, "--tty")
		}
		args = append(args, c.name)
		return k.podman.command(append(args, command...)...)
	})
}

// attach serves /attach/{ns}/{pod}/{container}: `podman attach` to the container's process.
func (k *kubeletAPI) attach(w http.ResponseWriter, r *http.Request) {
	k.remoteCommand(w, r, func(c ctr, tty, stdin bool) *exec.Cmd {
		args := []string{"attach", "--sig-proxy=false"}
		if !stdin {
			args = append(args, "--no-stdin")
		}
		return k.podman.command(append(args, c.name)...)
	})
}

type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

func (k *kubeletAPI) remoteCommand(w http.ResponseWriter, r *http.Request, command func(c ctr, tty, stdin bool) *exec.Cmd) {
	q := r.URL.Query()
	flag := func(name string) bool { v, _ := strconv.ParseBool(q.Get(name)); return v }
	opts := streamOptions{stdin: flag(corev1.ExecStdinParam), stdout: flag(corev1.ExecStdoutParam), stderr: flag(corev1.ExecStderrParam), tty: flag(corev1.ExecTTYParam)}
	if opts.tty {
		opts.stderr = false
	}
	if !opts.stdin && !opts.stdout && !opts.stderr {
		failure(w, http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr")
		return
	}
	c, err := k.podman.running(r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container"))
	if err != nil {
		failure(w, http.StatusBadRequest, "%v", err)
		return
	}
	s, err := acceptStreams(w, r, opts)
	if err != nil {
		return
	}
	defer s.conn.Close()
	err = s.run(command(c, opts.tty, opts.stdin))
	s.writeStatus(err)
}

type streams struct {
	conn                        httpstream.Connection
	stdin, resize               io.Reader
	stdout, stderr, errorStream io.WriteCloser
	opts                        streamOptions
}

// acceptStreams upgrades to SPDY and waits for the streams the client opens, as the kubelet's
// remote command server does; on failure it has answered the client.
func acceptStreams(w http.ResponseWriter, r *http.Request, opts streamOptions) (*streams, error) {
	if _, err := httpstream.Handshake(r, w, []string{remotecommand.StreamProtocolV4Name}); err != nil {
		return nil, err
	}
	type created struct {
		stream    httpstream.Stream
		replySent <-chan struct{}
	}
	ch := make(chan created)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(stream httpstream.Stream, replySent <-chan struct{}) error {
		ch <- created{stream, replySent}
		return nil
	})
	if conn == nil {
		return nil, errors.New("upgrade failed")
	}
	conn.SetIdleTimeout(4 * time.Hour)
	s := &streams{conn: conn, opts: opts}
	want := 1
	for _, b := range []bool{opts.stdin, opts.stdout, opts.stderr, opts.tty} {
		if b {
			want++
		}
	}
	timeout := time.After(remotecommand.DefaultStreamCreationTimeout)
	var replies []<-chan struct{}
	for got := 0; got < want; {
		select {
		case c := <-ch:
			switch c.stream.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				s.errorStream = c.stream
			case corev1.StreamTypeStdin:
				s.stdin = c.stream
			case corev1.StreamTypeStdout:
				s.stdout = c.stream
			case corev1.StreamTypeStderr:
				s.stderr = c.stream
			case corev1.StreamTypeResize:
				s.resize = c.stream
			default:
				c.stream.Reset()
				continue
			}
			replies = append(replies, c.replySent)
			got++
		case <-timeout:
			conn.Close()
			return nil, errors.New("timed out waiting for the client's streams")
		}
	}
	for _, reply := range replies {
		<-reply
	}
	if s.errorStream == nil {
		conn.Close()
		return nil, errors.New("the client opened no error stream")
	}
	return s, nil
}

// run runs cmd wired to the streams; stdin is copied without being waited for, so the command's
// end does not wait for the client to close its input.
func (s *streams) run(cmd *exec.Cmd) error {
	if s.opts.tty {
		return s.runTTY(cmd)
	}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if s.stdin != nil {
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		go func() {
			io.Copy(in, s.stdin)
			in.Close()
		}()
	}
	return cmd.Run()
}

func (s *streams) runTTY(cmd *exec.Cmd) error {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return err
	}
	defer ptmx.Close()
	// raw from the start: the terminal would echo input that arrives before podman sets it raw
	if _, err := term.MakeRaw(int(tty.Fd())); err != nil {
		tty.Close()
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	err = cmd.Start()
	tty.Close()
	if err != nil {
		return err
	}
	if s.resize != nil {
		go func() {
			decoder := json.NewDecoder(s.resize)
			for {
				var size struct{ Width, Height uint16 }
				if decoder.Decode(&size) != nil {
					return
				}
				pty.Setsize(ptmx, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}()
	}
	if s.stdin != nil {
		go io.Copy(ptmx, s.stdin)
	}
	copied := make(chan struct{})
	go func() {
		if s.stdout != nil {
			io.Copy(s.stdout, ptmx)
		} else {
			io.Copy(io.Discard, ptmx)
		}
		close(copied)
	}()
	err = cmd.Wait()
	// the output left in the terminal; reading ends with EIO once it is drained
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	return err
}

// writeStatus reports the end as protocol v4 does: Success, or the exit code as a cause.
func (s *streams) writeStatus(err error) {
	status := metav1.Status{Status: metav1.StatusSuccess}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() > 0 {
		code := exitErr.ExitCode()
		status = metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", err),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(code)}}},
		}
	} else if err != nil {
		status = metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	}
	for _, out := range []io.WriteCloser{s.stdout, s.stderr} {
		if out != nil {
			out.Close()
		}
	}
	b, _ := json.Marshal(status)
	s.errorStream.Write(b)
	s.errorStream.Close()
}
