package server

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Auth checks bearer tokens. In static mode the secret is fixed at start.
// In pool mode (pre-warmed sandboxes) the agent starts without a secret;
// the first request that carries a bearer token claims it, and the secret
// is persisted so that a restarted agent keeps it.
type Auth struct {
	path string // pool mode: where the claimed secret is persisted; empty in static mode

	// mu guards secret: pool mode sets it once, on the first claim.
	mu     sync.Mutex
	secret []byte
}

// Errors of NewStaticAuth and NewPoolAuth, for the caller to name the
// settings that fix them.
var (
	// ErrNoSecret is returned by NewStaticAuth for an empty secret.
	ErrNoSecret = errors.New("no secret: the agent refuses to run without one")
	// ErrSecretPath is wrapped by NewPoolAuth's error when the claimed
	// secret could not be saved where it was asked to.
	ErrSecretPath = errors.New("pool mode cannot save the claimed secret")
)

// NewStaticAuth returns an Auth that accepts exactly secret, which must not
// be empty (ErrNoSecret).
func NewStaticAuth(secret string) (*Auth, error) {
	if secret == "" {
		return nil, ErrNoSecret
	}
	return &Auth{secret: []byte(secret)}, nil
}

// NewPoolAuth returns an Auth in pool mode that persists the claimed secret
// at path. If path already holds a secret (the agent restarted after a
// claim), that secret is in force at once. If not, path's directory must
// exist or be creatable, and be writable: else every claim would fail, so
// NewPoolAuth fails instead, with an error that wraps ErrSecretPath.
func NewPoolAuth(path string) (*Auth, error) {
	a := &Auth{path: path}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := checkWritable(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("%w at %s: %w", ErrSecretPath, path, err)
		}
		return a, nil
	case err != nil:
		return nil, fmt.Errorf("reading the pool secret: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return nil, fmt.Errorf("the pool secret file %s is empty", path)
	}
	a.secret = []byte(secret)
	return a, nil
}

// Claimed reports whether a secret is in force.
func (a *Auth) Claimed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.secret != nil
}

// errPersist marks a claim that could not be saved; the claim is then not
// made, so that a restart cannot hand the sandbox to someone else.
var errPersist = errors.New("could not persist the claimed secret")

// check reports whether the request's bearer token is accepted, claiming
// it first in pool mode if no secret is in force yet; claimed reports
// that this request made the claim.
func (a *Auth) check(r *http.Request) (ok, claimed bool, err error) {
	if len(r.Header.Values("Authorization")) > 1 {
		// Proxies and servers differ on which of two they would take.
		return false, false, errorf(http.StatusBadRequest, "more than one Authorization header")
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		// Browsers cannot set headers on a WebSocket; see wsTokenPrefix.
		if token, ok = wsToken(r); !ok {
			return false, false, nil
		}
	}
	return a.checkToken(token)
}

// checkToken reports whether token is accepted, claiming it first in pool
// mode if no secret is in force yet; claimed reports that this call made
// the claim.
func (a *Auth) checkToken(token string) (ok, claimed bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.secret == nil && a.path != "" {
		if err := writeSecret(a.path, token); err != nil {
			return false, false, fmt.Errorf("%w: %v", errPersist, err)
		}
		a.secret = []byte(token)
		return true, true, nil
	}
	return a.secret != nil && subtle.ConstantTimeCompare([]byte(token), a.secret) == 1, false, nil
}

// isSecret reports whether token is the secret in force; it never claims.
// The preview proxy uses it to keep the secret from the sandbox's apps.
func (a *Auth) isSecret(token string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.secret != nil && subtle.ConstantTimeCompare([]byte(token), a.secret) == 1
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive, as RFC 9110 says.
func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	token := strings.TrimSpace(h[len(prefix):])
	return token, token != ""
}

// basicPassword returns the password of an "Authorization: Basic
// <base64(user:password)>" header (or Proxy-Authorization), whatever the
// user: what curl -U :TOKEN and http_proxy=http://x:TOKEN@host send.
func basicPassword(h string) (string, bool) {
	const prefix = "basic "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return "", false
	}
	_, password, ok := strings.Cut(string(b), ":")
	return password, ok && password != ""
}

// checkWritable creates dir if it does not exist, then creates and removes
// a file in it, as writeSecret will.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".sandbox-secret-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// writeSecret writes secret to path atomically with mode 0600: a temporary
// file in the same directory, synced, then renamed over path.
func writeSecret(path, secret string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".sandbox-secret-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(secret); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// requireToken lets a request through only with an accepted bearer token;
// /health and /openapi.yaml are open, and /metrics with
// Config.MetricsOpen. A request that passes marks its connection as
// authenticated (see Listener). Any other reply is the connection's last:
// a client without the token gets nothing more out of it, and whatever
// body it declared is not waited for.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/openapi.yaml" || (s.cfg.MetricsOpen && r.URL.Path == "/metrics") {
			next.ServeHTTP(w, r)
			return
		}
		if s.authorize(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// authorize reports whether r carries an accepted bearer token, and marks
// its connection as authenticated if so (see Listener). If not, it has
// answered 401 (or 400, or 500 for a claim not saved), as the
// connection's last reply.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	ok, claimed, err := s.auth.check(r)
	if claimed {
		s.log.Info().Str("request_id", requestID(r)).Str("remote", r.RemoteAddr).Msg("pool sandbox claimed")
	}
	if ok {
		if c := connOf(r); c != nil {
			c.Authenticate()
		}
		return true
	}
	s.labelUnrouted(r)
	closeAfterReply(w)
	if err == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-executor"`)
		err = errorf(http.StatusUnauthorized, "unauthorized: a valid 'Authorization: Bearer <secret>' header is required")
	}
	if !errors.Is(err, errPersist) { // a claim not saved is the agent's failure
		markAnon(r)
	}
	s.writeError(w, r, err)
	return false
}
