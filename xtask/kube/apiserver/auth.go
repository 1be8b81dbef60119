package main

import (
	"context"
	"os"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/klog/v2"
)

// applyAuth authenticates x509 client certificates signed by the ground's CA (the user is the
// CN, the groups are the O fields) and bearer tokens of a static token file (CSV:
// token,user,uid,"group1,group2"; read again whenever it changes). Everything authenticated is allowed: RBAC objects are stored
// but not enforced.
func applyAuth(cfg *genericapiserver.Config, caFile, tokenFile string) error {
	if !exists(tokenFile) {
		if err := os.WriteFile(tokenFile, nil, 0o600); err != nil {
			return err
		}
	}
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", caFile)
	if err != nil {
		return err
	}
	tokens, err := newReloadingTokens(tokenFile)
	if err != nil {
		return err
	}
	var request authenticator.Request = union.New(
		x509.NewDynamic(ca.VerifyOptions, x509.CommonNameUserConversion),
		bearertoken.New(tokens),
	)
	cfg.Authentication.Authenticator = group.NewAuthenticatedGroupAdder(request)
	if err := cfg.Authentication.ApplyClientCert(ca, cfg.SecureServing); err != nil {
		return err
	}
	cfg.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	return nil
}

// reloadingTokens is the static token file authenticator of k8s.io/apiserver, read again when
// the file changes, so that tokens written after the start (service accounts) work at once.
type reloadingTokens struct {
	path    string
	mu      sync.Mutex
	mtime   time.Time
	size    int64
	current *tokenfile.TokenAuthenticator
}

func newReloadingTokens(path string) (*reloadingTokens, error) {
	r := &reloadingTokens{path: path}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *reloadingTokens) reload() error {
	st, err := os.Stat(r.path)
	if err != nil {
		return err
	}
	if r.current != nil && st.ModTime().Equal(r.mtime) && st.Size() == r.size {
		return nil
	}
	tokens, err := tokenfile.NewCSV(r.path)
	if err != nil {
		return err
	}
	r.current, r.mtime, r.size = tokens, st.ModTime(), st.Size()
	return nil
}

func (r *reloadingTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	r.mu.Lock()
	if err := r.reload(); err != nil {
		// keep the tokens last read; the error names the file, never a token
		klog.InfoS("reading the token file", "err", err)
	}
	current := r.current
	r.mu.Unlock()
	return current.AuthenticateToken(ctx, token)
}
