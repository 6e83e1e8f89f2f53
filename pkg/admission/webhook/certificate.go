package webhook

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// certificatePollInterval is how often RunServer looks for a serving
// certificate that is not there yet.
const certificatePollInterval = time.Second

// waitForCertificate polls CertDir until the certificate and key load. It
// returns nil, nil when ctx ends first.
func (s *server) waitForCertificate(ctx context.Context, auxErrs <-chan error) (*certwatcher.CertWatcher, error) {
	certPath := filepath.Join(s.opts.CertDir, s.opts.CertName)
	keyPath := filepath.Join(s.opts.CertDir, s.opts.KeyName)
	tick := time.NewTicker(certificatePollInterval)
	defer tick.Stop()
	waiting := false
	for {
		w, err := certwatcher.New(certPath, keyPath)
		if err == nil {
			w.RegisterCallback(s.certificateLoaded)
			s.certificate.Store(w)
			return w, nil
		}
		if !waiting {
			s.log.Info("waiting for the serving certificate", "cert", certPath, "key", keyPath, "reason", err.Error())
			waiting = true
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case err := <-auxErrs:
			return nil, err
		case <-tick.C:
		}
	}
}

// certificateLoaded runs on the first load and on every rotation.
func (s *server) certificateLoaded(c tls.Certificate) {
	leaf := c.Leaf
	if leaf == nil {
		return
	}
	s.metrics.certificateExpiry.Set(float64(leaf.NotAfter.Unix()))
	s.log.Info("serving certificate loaded", "serial", leaf.SerialNumber.String(), "notAfter", leaf.NotAfter.UTC(), "dnsNames", leaf.DNSNames)
}
