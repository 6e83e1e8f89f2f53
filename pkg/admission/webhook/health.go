package webhook

import (
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// healthMux serves /healthz (the process answers) and /readyz (the
// certificate is loaded, the TLS listener completes a handshake, and the
// server is not shutting down).
func (s *server) healthMux() *http.ServeMux {
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	ready := &healthz.Handler{Checks: map[string]healthz.Checker{
		"serving-certificate": func(*http.Request) error {
			if s.certificate.Load() == nil {
				return fmt.Errorf("no serving certificate loaded from %s yet", s.opts.CertDir)
			}
			return nil
		},
		"tls-listener": func(r *http.Request) error {
			check := s.tlsChecker.Load()
			if check == nil {
				return errors.New("TLS listener not started")
			}
			return (*check)(r)
		},
		"not-shutting-down": func(*http.Request) error {
			if s.shuttingDown.Load() {
				return errors.New("shutting down")
			}
			return nil
		},
	}}
	mux := http.NewServeMux()
	for path, h := range map[string]http.Handler{"/healthz": live, "/readyz": ready} {
		mux.Handle(path, http.StripPrefix(path, h))
		mux.Handle(path+"/", http.StripPrefix(path, h))
	}
	return mux
}
