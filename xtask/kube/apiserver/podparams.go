package main

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podParameterCodec reads the query parameters of pods/log, exec, attach and portforward into
// their options. Without internal types there are no generated url.Values conversions for
// them (kube-apiserver has them in its legacy scheme); every other kind goes to metav1's codec.
type podParameterCodec struct{ runtime.ParameterCodec }

func (c podParameterCodec) DecodeParameters(values url.Values, from schema.GroupVersion, into runtime.Object) error {
	d := params{values: values}
	switch o := into.(type) {
	case *corev1.PodLogOptions:
		o.Container = values.Get("container")
		o.Follow = d.bool("follow")
		o.Previous = d.bool("previous")
		o.Timestamps = d.bool("timestamps")
		o.InsecureSkipTLSVerifyBackend = d.bool("insecureSkipTLSVerifyBackend")
		o.SinceSeconds = d.int64("sinceSeconds")
		o.TailLines = d.int64("tailLines")
		o.LimitBytes = d.int64("limitBytes")
		if s := values.Get("sinceTime"); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return fmt.Errorf("sinceTime: %w", err)
			}
			o.SinceTime = &metav1.Time{Time: t}
		}
		if s := values.Get("stream"); s != "" {
			o.Stream = &s
		}
	case *corev1.PodExecOptions:
		o.Stdin, o.Stdout, o.Stderr, o.TTY = d.bool("stdin"), d.bool("stdout"), d.bool("stderr"), d.bool("tty")
		o.Container = values.Get("container")
		o.Command = values["command"]
	case *corev1.PodAttachOptions:
		o.Stdin, o.Stdout, o.Stderr, o.TTY = d.bool("stdin"), d.bool("stdout"), d.bool("stderr"), d.bool("tty")
		o.Container = values.Get("container")
	case *corev1.PodPortForwardOptions:
		for _, p := range values["ports"] {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil {
				return fmt.Errorf("ports: %q is not a number", p)
			}
			o.Ports = append(o.Ports, int32(n))
		}
	default:
		return c.ParameterCodec.DecodeParameters(values, from, into)
	}
	return d.err
}

type params struct {
	values url.Values
	err    error
}

func (p *params) bool(name string) bool {
	s := p.values.Get(name)
	if s == "" {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%s: %q is not a boolean", name, s)
	}
	return b
}

func (p *params) int64(name string) *int64 {
	s := p.values.Get(name)
	if s == "" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%s: %q is not a number", name, s)
	}
	return &n
}
