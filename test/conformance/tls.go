//go:build linux

package conformance

import (
	"crypto/x509/pkix"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// testPKI is a CA with a server certificate for the database's service name
// and a client certificate, PEM-encoded.
type testPKI struct {
	caPEM                 string
	serverCert, serverKey string
	clientCert, clientKey string
}

func newTestPKI(serverName, clientName string) (*testPKI, error) {
	ca, err := controlplane.NewCA("conformance database CA")
	if err != nil {
		return nil, err
	}
	server, err := ca.Issue(pkix.Name{CommonName: serverName}, serverName)
	if err != nil {
		return nil, err
	}
	client, err := ca.Issue(pkix.Name{CommonName: clientName})
	if err != nil {
		return nil, err
	}
	return &testPKI{
		caPEM:      string(ca.CertPEM),
		serverCert: string(server.Cert), serverKey: string(server.Key),
		clientCert: string(client.Cert), clientKey: string(client.Key),
	}, nil
}
