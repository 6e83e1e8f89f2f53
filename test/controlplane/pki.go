package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority for tests: a self-signed certificate and
// its key, which sign what Issue makes.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM is Cert in PEM, for a trust bundle.
	CertPEM []byte
}

// KeyPair is a certificate and its private key, both in PEM.
type KeyPair struct {
	Cert, Key []byte
}

// NewCA makes a CA named commonName, valid from an hour ago, so that a clock
// a little behind accepts it, for ten years.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// Issue makes a certificate for subject signed by the CA, valid for a year:
// a client certificate, and a serving certificate for hosts (DNS names or IP
// addresses) too when they are given.
func (ca *CA) Issue(subject pkix.Name, hosts ...string) (KeyPair, error) {
	return ca.IssueEdited(nil, subject, hosts...)
}

// IssueEdited is Issue with edit, when not nil, changing the certificate
// before it is signed: a serial or a validity of the test's choosing.
func (ca *CA) IssueEdited(edit func(*x509.Certificate), subject pkix.Name, hosts ...string) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue a certificate for %s: %w", subject.CommonName, err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Cert: pemBlock("CERTIFICATE", der), Key: keyPEM}, nil
}

// privateKeyPEM encodes key as PKCS #8, which Go, OpenSSL and Python read
// alike.
func privateKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// pki is a CA of a local cluster and the files it wrote.
type pki struct {
	dir string
	ca  *CA
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := NewCA("glance-operator local cluster CA")
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca}
	if err := os.WriteFile(p.path("ca.crt"), ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	keyPEM, err := privateKeyPEM(ca.Key)
	if err != nil {
		return nil, err
	}
	return p, os.WriteFile(p.path("ca.key"), keyPEM, 0o600)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// issue writes name.crt and name.key, made by the CA's Issue.
func (p *pki) issue(name string, subject pkix.Name, hosts ...string) error {
	kp, err := p.ca.Issue(subject, hosts...)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := os.WriteFile(p.path(name+".crt"), kp.Cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.path(name+".key"), kp.Key, 0o600)
}

// serviceAccountKey writes the RSA key pair that signs service-account tokens.
func (p *pki) serviceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writePEM(p.path("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(p.path("sa.pub"), "PUBLIC KEY", pub)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pemBlock(typ, der), 0o600)
}

// kubeconfig writes a kubeconfig that authenticates with the client
// certificate name.crt/name.key.
func (p *pki) kubeconfig(path, server, name string) error {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: local
  context:
    cluster: local
    user: %s
current-context: local
`, server, p.path("ca.crt"), name, p.path(name+".crt"), p.path(name+".key"), name)
	return os.WriteFile(path, []byte(content), 0o600)
}
