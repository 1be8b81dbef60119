package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// containerLogs serves /containerLogs/{ns}/{pod}/{container} as the kubelet does, from the CRI
// log files conmon writes (`<time> <stream> <F|P> <text>`, kube-ground/src/runtime/log.rs):
// follow, previous, timestamps, tailLines, sinceSeconds, sinceTime, limitBytes.
func (k *kubeletAPI) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	runs, err := k.podman.containers(ns, pod, container)
	if err != nil {
		failure(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if len(runs) == 0 {
		failure(w, http.StatusBadRequest, "container %q in pod %q is waiting to start: ContainerCreating", container, pod)
		return
	}
	run := runs[0]
	attempt := run.attempt
	previous := q.Get("previous") == "true"
	if previous {
		attempt--
	}
	path := filepath.Join(k.logRoot, fmt.Sprintf("%s_%s_%s", ns, pod, run.uid), container, fmt.Sprintf("%d.log", attempt))
	f, err := os.Open(path)
	if attempt < 0 || (err != nil && os.IsNotExist(err)) {
		if previous {
			failure(w, http.StatusBadRequest, "previous terminated container %q in pod %q not found", container, pod)
		} else {
			failure(w, http.StatusBadRequest, "container %q in pod %q is waiting to start: ContainerCreating", container, pod)
		}
		return
	}
	if err != nil {
		failure(w, http.StatusInternalServerError, "%v", err)
		return
	}
	defer f.Close()
	out := logWriter{w: w, timestamps: q.Get("timestamps") == "true", limit: -1}
	if s := q.Get("limitBytes"); s != "" {
		out.limit, _ = strconv.ParseInt(s, 10, 64)
	}
	if s := q.Get("sinceSeconds"); s != "" {
		n, _ := strconv.ParseInt(s, 10, 64)
		out.since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if s := q.Get("sinceTime"); s != "" {
		out.since, _ = time.Parse(time.RFC3339, s)
	}
	var parser logParser
	data, err := io.ReadAll(f)
	if err != nil {
		failure(w, http.StatusInternalServerError, "%v", err)
		return
	}
	lines := parser.feed(data)
	if s := q.Get("tailLines"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(lines) {
			lines = lines[len(lines)-n:]
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	if !out.write(lines) || previous || q.Get("follow") != "true" || !run.running {
		return
	}
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	// follow: what the file gains, until the container's process ends or the client leaves
	buf := make([]byte, 32<<10)
	lastCheck := time.Now()
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if !out.write(parser.feed(buf[:n])) {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			continue
		}
		if err != nil && err != io.EOF {
			return
		}
		if time.Since(lastCheck) > time.Second {
			lastCheck = time.Now()
			if !k.podman.isRunning(run.name) {
				n, _ := f.Read(buf)
				out.write(parser.feed(buf[:n]))
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p podman) isRunning(name string) bool {
	out, err := p.command("container", "inspect", "--format={{.State.Running}}", name).Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

type logLine struct {
	time   time.Time
	stream int
	text   []byte
}

// logParser turns CRI log bytes into whole lines, joining partial (P) lines per stream.
type logParser struct {
	rest    []byte
	partial [2]*logLine
}

func (p *logParser) feed(data []byte) []logLine {
	p.rest = append(p.rest, data...)
	var lines []logLine
	for {
		i := bytes.IndexByte(p.rest, '\n')
		if i < 0 {
			return lines
		}
		raw := p.rest[:i]
		p.rest = p.rest[i+1:]
		parts := bytes.SplitN(raw, []byte(" "), 4)
		if len(parts) < 3 {
			continue
		}
		stream := 0
		switch string(parts[1]) {
		case "stdout":
		case "stderr":
			stream = 1
		default:
			continue
		}
		var text []byte
		if len(parts) == 4 {
			text = parts[3]
		}
		line := p.partial[stream]
		p.partial[stream] = nil
		if line == nil {
			t, _ := time.Parse(time.RFC3339Nano, string(parts[0]))
			line = &logLine{time: t, stream: stream}
		}
		line.text = append(line.text, text...)
		if string(parts[2]) == "P" {
			p.partial[stream] = line
			continue
		}
		lines = append(lines, *line)
	}
}

type logWriter struct {
	w          io.Writer
	timestamps bool
	since      time.Time
	limit      int64
}

// write returns false once the client is gone or limitBytes is spent.
func (l *logWriter) write(lines []logLine) bool {
	for _, line := range lines {
		if !l.since.IsZero() && line.time.Before(l.since) {
			continue
		}
		var b []byte
		if l.timestamps {
			b = append(b, line.time.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")...)
			b = append(b, ' ')
		}
		b = append(b, line.text...)
		b = append(b, '\n')
		if l.limit >= 0 && int64(len(b)) > l.limit {
			b = b[:l.limit]
		}
		if _, err := l.w.Write(b); err != nil {
			return false
		}
		if l.limit >= 0 {
			l.limit -= int64(len(b))
			if l.limit == 0 {
				return false
			}
		}
	}
	return true
}
