package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki is the certificate authority made at first start in --data-dir, and what it signed.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// ensure makes whatever is missing: the CA, the serving certificate, the admin client
// certificate (O=system:masters), the kubelet API's serving and client certificates, and the
// admin kubeconfig.
func (p pki) ensure(serverURL string, serviceIP net.IP) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if !exists(p.path("ca.crt")) || !exists(p.path("ca.key")) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			Subject:               pkix.Name{CommonName: "slurm-dev-kube-ca"},
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		if err := p.write("ca", tmpl, key, nil, nil); err != nil {
			return err
		}
	}
	caCert, caKey, err := p.load("ca")
	if err != nil {
		return err
	}
	if !exists(p.path("apiserver.crt")) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), serviceIP},
		}
		if err := p.issue("apiserver", tmpl, caCert, caKey); err != nil {
			return err
		}
	}
	if !exists(p.path("admin.crt")) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := p.issue("admin", tmpl, caCert, caKey); err != nil {
			return err
		}
	}
	// The kubelet API (kubeletapi.go) serves with the first and admits only the second.
	if !exists(p.path("kubelet.crt")) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-ground-kubelet"},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		if err := p.issue("kubelet", tmpl, caCert, caKey); err != nil {
			return err
		}
	}
	if !exists(p.path("apiserver-kubelet-client.crt")) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: kubeletClientCN, Organization: []string{"system:masters"}},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := p.issue("apiserver-kubelet-client", tmpl, caCert, caKey); err != nil {
			return err
		}
	}
	return p.writeKubeconfig(serverURL)
}

// kubeletClientCN is who the API server is to the kubelet API, as kube-apiserver's
// --kubelet-client-certificate names it.
const kubeletClientCN = "kube-apiserver-kubelet-client"

func (p pki) issue(name string, tmpl *x509.Certificate, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	return p.write(name, tmpl, key, ca, caKey)
}

func (p pki) write(name string, tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) error {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().AddDate(10, 0, 0)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return fmt.Errorf("signing %s certificate: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path(name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.path(name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func (p pki) load(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(p.path(name + ".crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(p.path(name + ".key"))
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New(name + ": not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	return cert, key, err
}

func (p pki) writeKubeconfig(serverURL string) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(p.path("admin.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.path("admin.key"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["slurm-dev"] = &clientcmdapi.Cluster{Server: serverURL, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["slurm-dev"] = &clientcmdapi.Context{Cluster: "slurm-dev", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "slurm-dev"
	return clientcmd.WriteToFile(*cfg, p.path("admin.kubeconfig"))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
