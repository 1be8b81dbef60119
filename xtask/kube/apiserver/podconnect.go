package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilproxy "k8s.io/apimachinery/pkg/util/proxy"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// kubeletClient reaches the kubelet API of a pod's node, as kube-apiserver does: TLS verified
// with the ground's CA, a client certificate for kubeletClientCN, the port of the Node's
// status.daemonEndpoints.kubeletEndpoint. Every node's kubelet API is one process on the host's
// loopback (kubeletapi.go), so the host is 127.0.0.1, not the node's address (which is inside
// the ground's network namespace).
type kubeletClient struct {
	transport *http.Transport
	pods      *genericregistry.Store
	nodes     *genericregistry.Store
}

func newKubeletClient(certs pki) (*kubeletClient, error) {
	caPEM, err := os.ReadFile(certs.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("ca.crt holds no certificate")
	}
	cert, err := tls.LoadX509KeyPair(certs.path("apiserver-kubelet-client.crt"), certs.path("apiserver-kubelet-client.key"))
	if err != nil {
		return nil, err
	}
	return &kubeletClient{transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: cas, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
	}}, nil
}

// location is https://127.0.0.1:<kubelet port>/<path>/<namespace>/<pod>[/<container>]: the
// container defaulted when the pod has one and checked against the pod's spec.
func (k *kubeletClient) location(ctx context.Context, name, container, path string, withContainer bool) (*url.URL, error) {
	obj, err := k.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := obj.(*corev1.Pod)
	if withContainer {
		if container == "" {
			if len(pod.Spec.Containers) != 1 {
				var names []string
				for _, c := range pod.Spec.Containers {
					names = append(names, c.Name)
				}
				return nil, apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", name, names))
			}
			container = pod.Spec.Containers[0].Name
		}
		if !hasContainer(pod, container) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, name))
		}
	}
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	nodeObj, err := k.nodes.Get(genericapirequest.WithNamespace(ctx, ""), pod.Spec.NodeName, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	port := nodeObj.(*corev1.Node).Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no kubelet endpoint", pod.Spec.NodeName))
	}
	p := "/" + path + "/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(name)
	if withContainer {
		p += "/" + url.PathEscape(container)
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), Path: p}, nil
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// podLogREST serves pods/log: the kubelet's /containerLogs streamed through.
type podLogREST struct{ kubelet *kubeletClient }

var _ rest.GetterWithOptions = &podLogREST{}
var _ rest.StorageMetadata = &podLogREST{}

func (r *podLogREST) New() runtime.Object                    { return &corev1.Pod{} }
func (r *podLogREST) Destroy()                               {}
func (r *podLogREST) ProducesMIMETypes(verb string) []string { return []string{"text/plain"} }
func (r *podLogREST) ProducesObject(verb string) interface{} { return "" }
func (r *podLogREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

func (r *podLogREST) Get(ctx context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	o, ok := opts.(*corev1.PodLogOptions)
	if !ok {
		return nil, fmt.Errorf("invalid options object: %#v", opts)
	}
	loc, err := r.kubelet.location(ctx, name, o.Container, "containerLogs", true)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	set := func(k string, b bool) {
		if b {
			q.Set(k, "true")
		}
	}
	set("follow", o.Follow)
	set("previous", o.Previous)
	set("timestamps", o.Timestamps)
	if o.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*o.SinceSeconds, 10))
	}
	if o.SinceTime != nil {
		q.Set("sinceTime", o.SinceTime.Format(time.RFC3339))
	}
	if o.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*o.TailLines, 10))
	}
	if o.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*o.LimitBytes, 10))
	}
	loc.RawQuery = q.Encode()
	return &genericrest.LocationStreamer{
		Location:        loc,
		Transport:       r.kubelet.transport,
		ContentType:     "text/plain",
		Flush:           o.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
		RedirectChecker: genericrest.PreventRedirects,
	}, nil
}

// podStreamREST serves pods/exec, pods/attach and pods/portforward as kube-apiserver does: an
// upgrade-aware proxy to the kubelet (SPDY clients), WebSocket clients of the v5 remote command
// protocol translated to SPDY, and port-forward's SPDY tunnelled over WebSocket unwrapped.
type podStreamREST struct {
	kubelet *kubeletClient
	kind    string // exec, attach or portforward
}

var _ rest.Connecter = &podStreamREST{}

func (r *podStreamREST) New() runtime.Object      { return &corev1.Pod{} }
func (r *podStreamREST) Destroy()                 {}
func (r *podStreamREST) ConnectMethods() []string { return []string{"GET", "POST"} }
func (r *podStreamREST) NewConnectOptions() (runtime.Object, bool, string) {
	switch r.kind {
	case "exec":
		return &corev1.PodExecOptions{}, false, ""
	case "attach":
		return &corev1.PodAttachOptions{}, false, ""
	}
	return &corev1.PodPortForwardOptions{}, false, ""
}

func (r *podStreamREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	q := url.Values{}
	var streams proxy.Options
	var loc *url.URL
	var err error
	switch o := opts.(type) {
	case *corev1.PodExecOptions:
		if len(o.Command) == 0 {
			return nil, apierrors.NewBadRequest("you must specify at least 1 command")
		}
		streams = proxy.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}
		for _, c := range o.Command {
			q.Add(corev1.ExecCommandParam, c)
		}
		loc, err = r.kubelet.location(ctx, name, o.Container, "exec", true)
	case *corev1.PodAttachOptions:
		streams = proxy.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}
		loc, err = r.kubelet.location(ctx, name, o.Container, "attach", true)
	case *corev1.PodPortForwardOptions:
		for _, p := range o.Ports {
			q.Add("port", strconv.Itoa(int(p)))
		}
		loc, err = r.kubelet.location(ctx, name, "", "portForward", false)
	default:
		return nil, fmt.Errorf("invalid options object: %#v", opts)
	}
	if err != nil {
		return nil, err
	}
	if r.kind != "portforward" {
		flag := func(k string, b bool) {
			if b {
				q.Set(k, "1")
			}
		}
		flag(corev1.ExecStdinParam, streams.Stdin)
		flag(corev1.ExecStdoutParam, streams.Stdout)
		flag(corev1.ExecStderrParam, streams.Stderr)
		flag(corev1.ExecTTYParam, streams.Tty)
	}
	loc.RawQuery = q.Encode()
	upgrade := utilproxy.NewUpgradeAwareHandler(loc, r.kubelet.transport, false, true, utilproxy.NewErrorResponder(responder))
	if r.kind == "portforward" {
		return proxy.NewTranslatingHandler(upgrade, proxy.NewTunnelingHandler(upgrade), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
	}
	translator := proxy.NewStreamTranslatorHandler(loc, r.kubelet.transport, 0, streams)
	return proxy.NewTranslatingHandler(upgrade, translator, wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}
