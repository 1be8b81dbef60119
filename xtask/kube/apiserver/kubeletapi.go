package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// runKubeletAPI is `kube-apiserver kubelet-api`: the kubelet API of every node of the ground in one
// process (the Rust test kubelet runs the pods; this serves their logs, exec, attach and
// port-forward over the same podman containers). Only the API server may call it: TLS with a
// client certificate of the ground's CA whose name is kubeletClientCN.
func runKubeletAPI(args []string) error {
	fs := flag.NewFlagSet("kubelet-api", flag.ExitOnError)
	address := fs.String("address", "127.0.0.1:10250", "HTTPS address (loopback)")
	dataDir := fs.String("data-dir", "", "the API server's --data-dir: ca.crt and kubelet.crt/key")
	containersConf := fs.String("containers-conf", "", "the ground's podman containers.conf")
	storageConf := fs.String("storage-conf", "", "the ground's podman storage.conf")
	logRoot := fs.String("log-root", "", "container logs, laid out as the kubelet's /var/log/pods")
	owner := fs.String("owner", "slurm-dev-kube", "value of the io.slurm-dev.kube-ground label on the ground's containers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dataDir == "" || *containersConf == "" || *storageConf == "" || *logRoot == "" {
		return errors.New("--data-dir, --containers-conf, --storage-conf and --log-root are required")
	}
	caPEM, err := os.ReadFile(filepath.Join(*dataDir, "ca.crt"))
	if err != nil {
		return err
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(caPEM) {
		return errors.New("ca.crt holds no certificate")
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(*dataDir, "kubelet.crt"), filepath.Join(*dataDir, "kubelet.key"))
	if err != nil {
		return err
	}
	k := &kubeletAPI{podman: podman{containersConf: *containersConf, storageConf: *storageConf, owner: *owner}, logRoot: *logRoot}
	server := &http.Server{
		Addr:    *address,
		Handler: k,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    cas,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
			// a pod holds no certificate of the CA, but an admin does: only the API server's passes
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != kubeletClientCN {
					return fmt.Errorf("only %s may call the kubelet API", kubeletClientCN)
				}
				return nil
			},
		},
	}
	fmt.Fprintf(os.Stderr, "kubelet API on https://%s\n", *address)
	return server.ListenAndServeTLS("", "")
}

type kubeletAPI struct {
	podman  podman
	logRoot string
}

// ServeHTTP routes as the kubelet: /containerLogs/{ns}/{pod}/{container}, /exec/…, /attach/…
// (the same), /portForward/{ns}/{pod}. By hand: in GOPATH mode net/http's mux keeps its Go 1.21
// patterns, without wildcards.
func (k *kubeletAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	route := map[string]struct {
		handler  func(http.ResponseWriter, *http.Request)
		segments int
	}{
		"containerLogs": {k.containerLogs, 4},
		"exec":          {k.exec, 4},
		"attach":        {k.attach, 4},
		"portForward":   {k.portForward, 3},
	}[parts[0]]
	if route.handler == nil || len(parts) != route.segments || (parts[0] == "containerLogs" && r.Method != http.MethodGet) {
		http.NotFound(w, r)
		return
	}
	for i, name := range []string{"ns", "pod", "container"}[:route.segments-1] {
		r.SetPathValue(name, parts[i+1])
	}
	route.handler(w, r)
}

// failure answers before any upgrade, as text: the API server hands it on to the client.
func failure(w http.ResponseWriter, code int, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), code)
}
