package webhook

import (
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// addHealthChecks makes /healthz report the process alive and /readyz
// report ready while the certificate is loaded, the TLS listener completes
// a handshake (tlsListener), and the server is not shutting down.
func (s *server) addHealthChecks(mgr manager.Manager, tlsListener healthz.Checker) error {
	ready := map[string]healthz.Checker{
		"serving-certificate": func(*http.Request) error {
			if s.certificate.Load() == nil {
				return fmt.Errorf("no serving certificate loaded from %s yet", s.opts.CertDir)
			}
			return nil
		},
		// No handshake before there is a certificate to offer: each would
		// only log a TLS error.
		"tls-listener": func(r *http.Request) error {
			if s.certificate.Load() == nil {
				return errNoCertificate
			}
			return tlsListener(r)
		},
		"not-shutting-down": func(*http.Request) error {
			if s.shutdown.Err() != nil {
				return errors.New("shutting down")
			}
			return nil
		},
	}
	for name, check := range ready {
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return err
		}
	}
	return mgr.AddHealthzCheck("ping", healthz.Ping)
}
