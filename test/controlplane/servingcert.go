package controlplane

import (
	"crypto/x509/pkix"
)

// WriteServingCertificate writes a new CA (ca.crt, ca.key) and a serving
// certificate for hosts signed by it (tls.crt, tls.key, the names
// controller-runtime's webhook server reads) into dir, and returns the CA
// certificate in PEM, for a webhook configuration's caBundle.
func WriteServingCertificate(dir, commonName string, hosts ...string) ([]byte, error) {
	p, err := newPKI(dir)
	if err != nil {
		return nil, err
	}
	if err := p.issue("tls", pkix.Name{CommonName: commonName}, hosts...); err != nil {
		return nil, err
	}
	return p.ca.CertPEM, nil
}
