package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"
)

// Webhooks given as a Service reference (admission and CRD conversion) are called as a real
// kube-apiserver calls them: the client is configured for https://<name>.<namespace>.svc:<port>
// (the TLS server name, verified against the caBundle), and only the TCP connection is carried
// differently. This server runs on the host's loopback, where neither the Service names nor the
// pod network exist, so each such connection is asked of netd (kube-ground netd), which
// resolves the Service in its own index and connects from inside the ground's network
// namespace to the Service's ClusterIP (its DNAT leads to a ready endpoint), then splices bytes.
//
// netd's dial socket, one connection per TCP connection: this side writes the target
// "<name>.<namespace>.svc:<port>\n"; netd answers "OK\n", after which the socket carries the
// connection's bytes both ways, or "ERROR <why>\n" and closes (no such Service, no ready
// endpoints, connection refused, ...). netd refuses anything but the ground's Services.

// netdDialer connects to Services through netd's dial socket.
type netdDialer struct {
	socket string
}

// handshakeTimeout bounds netd's answer when the caller's context has no deadline.
const handshakeTimeout = 15 * time.Second

// maxAnswer bounds netd's answer line.
const maxAnswer = 4096

func (d netdDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4":
	default:
		return nil, fmt.Errorf("dialing %s %s through the ground's network: only TCP is carried", network, addr)
	}
	var unix net.Dialer
	conn, err := unix.DialContext(ctx, "unix", d.socket)
	if err != nil {
		return nil, fmt.Errorf("dialing %s through the ground's network: netd does not answer on %s (is the ground's netd running?): %w", addr, d.socket, err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(handshakeTimeout)
	}
	_ = conn.SetDeadline(deadline)
	// a cancelled request ends the wait for netd's answer at once
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	answer, err := exchange(conn, addr)
	if !stop() || err != nil {
		conn.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("dialing %s through the ground's network (netd, %s): %w", addr, d.socket, err)
	}
	_ = conn.SetDeadline(time.Time{})
	if answer != "OK" {
		conn.Close()
		why := strings.TrimPrefix(answer, "ERROR ")
		return nil, fmt.Errorf("dialing %s through the ground's network: netd: %s", addr, why)
	}
	return conn, nil
}

// exchange sends the target and reads netd's one-line answer, byte by byte so that nothing of
// the connection's own bytes is read with it.
func exchange(conn net.Conn, target string) (string, error) {
	if _, err := conn.Write([]byte(target + "\n")); err != nil {
		return "", err
	}
	var line bytes.Buffer
	b := make([]byte, 1)
	for {
		if _, err := conn.Read(b); err != nil {
			if line.Len() == 0 {
				return "", fmt.Errorf("no answer: %w", err)
			}
			return "", fmt.Errorf("answer cut short (%q): %w", line.String(), err)
		}
		if b[0] == '\n' {
			return strings.TrimSuffix(line.String(), "\r"), nil
		}
		if line.Len() >= maxAnswer {
			return "", fmt.Errorf("answer longer than %d bytes", maxAnswer)
		}
		line.WriteByte(b[0])
	}
}

// groundServiceResolver resolves a Service to https://<name>.<namespace>.svc:<port>, the
// address netd is given, except default/kubernetes:443, which is this server on the loopback
// (as kube-apiserver's loopback resolver does).
type groundServiceResolver struct {
	loopback *url.URL
}

func (r groundServiceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if namespace == "default" && name == "kubernetes" && port == 443 {
		return &url.URL{Scheme: "https", Host: r.loopback.Host}, nil
	}
	return webhook.NewDefaultServiceResolver().ResolveEndpoint(namespace, name, port)
}

// serviceWebhooks returns the service resolver and the authentication-info wrapper that the
// admission webhooks and the CRD conversion webhooks use. Without a socket, a Service is dialed
// from the host as <name>.<namespace>.svc, as before netd carried them.
func serviceWebhooks(netdSocket string, loopback *rest.Config, tp trace.TracerProvider) (webhook.ServiceResolver, webhook.AuthenticationInfoResolverWrapper, error) {
	if netdSocket == "" {
		return webhook.NewDefaultServiceResolver(), webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, loopback, tp), nil
	}
	host, err := url.Parse(loopback.Host)
	if err != nil || host.Host == "" {
		return nil, nil, fmt.Errorf("the loopback client's host %q: %v", loopback.Host, err)
	}
	// kube-apiserver hands its proxy transport's dialer to the Service webhook clients in the
	// same way: the wrapper sets it as the rest.Config's Dial for every Service but
	// default/kubernetes, which gets the loopback client's configuration.
	proxy := &http.Transport{DialContext: netdDialer{socket: netdSocket}.DialContext}
	return groundServiceResolver{loopback: host}, webhook.NewDefaultAuthenticationInfoResolverWrapper(proxy, nil, loopback, tp), nil
}
