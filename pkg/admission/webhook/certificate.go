package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// certificatePollInterval is how often the server looks for a serving
// certificate that is not there yet.
const certificatePollInterval = time.Second

var errNoCertificate = errors.New("no serving certificate loaded yet")

// getCertificate answers a handshake with the certificate loaded last.
func (s *server) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	w := s.certificate.Load()
	if w == nil {
		return nil, errNoCertificate
	}
	return w.GetCertificate(hello)
}

// watchCertificate polls CertDir until the certificate and key load, then
// re-reads them on every change until ctx ends. A watch that fails is
// logged, not fatal: the server goes on with the certificate it has.
func (s *server) watchCertificate(ctx context.Context) error {
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
			if err := w.Start(ctx); err != nil {
				s.log.Error(err, "serving certificate watch stopped; rotations are no longer picked up")
			}
			<-ctx.Done()
			return nil
		}
		if !waiting {
			s.log.Info("waiting for the serving certificate", "cert", certPath, "key", keyPath, "reason", err.Error())
			waiting = true
		}
		select {
		case <-ctx.Done():
			return nil
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
