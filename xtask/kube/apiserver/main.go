// Command kube-apiserver is the test ground's Kubernetes API server: apiextensions-apiserver for
// CRDs and k8s.io/apiserver's generic etcd registry for the built-in resources, in one process.
// `kube-apiserver kubelet-api …` is the nodes' kubelet API instead (kubeletapi.go).
// See README.md for what is hand-written.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"
)

type options struct {
	dataDir       string
	etcdServers   string
	bindAddress   string
	securePort    int
	serviceCIDR   string
	auditLogPath  string
	tokenAuthFile string
	etcdPrefix    string
	netdSocket    string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "kubelet-api" {
		if err := runKubeletAPI(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "kube-apiserver kubelet-api:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.dataDir, "data-dir", "", "directory of the CA, certificates, kubeconfig (created at first start)")
	flag.StringVar(&o.etcdServers, "etcd-servers", "http://127.0.0.1:2379", "comma-separated etcd URLs")
	flag.StringVar(&o.bindAddress, "bind-address", "127.0.0.1", "address to serve on (loopback only)")
	flag.IntVar(&o.securePort, "secure-port", 6443, "HTTPS port")
	flag.StringVar(&o.serviceCIDR, "service-cluster-ip-range", "10.96.0.0/16", "range of Service ClusterIPs")
	flag.StringVar(&o.auditLogPath, "audit-log-path", "", "audit log file (level Metadata for every request); default <data-dir>/audit.log")
	flag.StringVar(&o.tokenAuthFile, "token-auth-file", "", "static bearer tokens, CSV token,user,uid,\"groups\"; default <data-dir>/tokens.csv, read again when it changes")
	flag.StringVar(&o.etcdPrefix, "etcd-prefix", "/registry", "etcd key prefix")
	flag.StringVar(&o.netdSocket, "netd-dial-socket", "", "netd's dial socket (unix): webhooks given as a Service reference are connected through it, from inside the ground's network; empty: dialed from the host as <name>.<namespace>.svc")
	klog.InitFlags(nil)
	flag.Parse()
	if err := o.complete(); err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver:", err)
		os.Exit(1)
	}
}

func (o *options) complete() error {
	if o.dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	ip := net.ParseIP(o.bindAddress)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--bind-address must be a loopback address, not %q", o.bindAddress)
	}
	if o.auditLogPath == "" {
		o.auditLogPath = filepath.Join(o.dataDir, "audit.log")
	}
	if o.tokenAuthFile == "" {
		o.tokenAuthFile = filepath.Join(o.dataDir, "tokens.csv")
	}
	o.etcdPrefix = "/" + strings.Trim(o.etcdPrefix, "/")
	return nil
}
