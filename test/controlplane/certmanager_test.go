package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/test/operatortest"
)

var (
	issuersGVR  = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	requestsGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificaterequests"}
)

const certNamespace = "certs"

// certManagerObjects is a self-signed Issuer signing a CA Certificate, a CA
// Issuer on its Secret, and a serving Certificate from that CA: the chain
// the chart builds for the webhook.
const certManagerObjects = `
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: certs}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ca, namespace: certs}
spec:
  isCA: true
  commonName: test-ca
  secretName: ca-tls
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: selfsigned, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca, namespace: certs}
spec: {ca: {secretName: ca-tls}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: serving, namespace: certs}
spec:
  secretName: serving-tls
  dnsNames: [webhook.certs.svc, webhook.certs.svc.cluster.local]
  usages: [server auth, digital signature]
  privateKey: {algorithm: ECDSA, size: 256, rotationPolicy: Always}
  issuerRef: {name: ca, kind: Issuer}
`

var servingDNSNames = []string{"webhook.certs.svc", "webhook.certs.svc.cluster.local"}

// TestCertManager runs the real cert-manager controller and cainjector beside
// a full local cluster: a self-signed CA chain issues a serving certificate,
// the cainjector puts the CA into annotated webhook configurations, a manual
// renewal (what `cmctl renew` does) issues a new certificate, and SIGTERM
// stops the process cleanly.
func TestCertManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)

	start := time.Now()
	c, err := StartCluster(ctx, ClusterOptions{Nodes: 1, CertManager: true})
	if c != nil {
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster with cert-manager ready in %s", time.Since(start).Round(time.Millisecond))

	cs := kubernetes.NewForConfigOrDie(c.Config)
	dyn := dynamic.NewForConfigOrDie(c.Config)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: certNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeObjects([]byte(certManagerObjects))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		gvr := issuersGVR
		if obj.GetKind() == "Certificate" {
			gvr = CertificatesGVR
		}
		if _, err := dyn.Resource(gvr).Namespace(certNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}

	// Webhook configurations: two that ask for the serving Certificate's CA,
	// one that does not. The rules match nothing the test creates.
	inject := map[string]string{"cert-manager.io/inject-ca-from": certNamespace + "/serving"}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
	}}
	clientConfig := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/admit")}
	for _, vwc := range []*admissionregistrationv1.ValidatingWebhookConfiguration{
		{ObjectMeta: metav1.ObjectMeta{Name: "injected", Annotations: inject}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-injected"}},
	} {
		vwc.Webhooks = []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.example.invalid", ClientConfig: clientConfig, Rules: rules,
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}}
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "injected", Annotations: inject},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.example.invalid", ClientConfig: clientConfig, Rules: rules,
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{issuersGVR, "selfsigned"}, {CertificatesGVR, "ca"}, {issuersGVR, "ca"}, {CertificatesGVR, "serving"}} {
		waitReady(ctx, t, dyn, o.gvr, o.name, 1)
	}

	caSecret := getSecret(ctx, t, cs, "ca-tls")
	caCert := parseCert(t, "ca-tls tls.crt", caSecret.Data[corev1.TLSCertKey])
	if !caCert.IsCA || caCert.Subject.CommonName != "test-ca" {
		t.Fatalf("ca-tls holds %q (IsCA %v), want the CA test-ca", caCert.Subject.CommonName, caCert.IsCA)
	}
	serving := checkServing(t, getSecret(ctx, t, cs, "serving-tls"), caSecret)
	caPEM := caSecret.Data[corev1.TLSCertKey]

	t.Run("cainjector", func(t *testing.T) {
		waitFor(t, "CA injected into the annotated ValidatingWebhookConfiguration", func() bool {
			vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "injected", metav1.GetOptions{})
			return err == nil && bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, caPEM)
		})
		waitFor(t, "CA injected into the annotated MutatingWebhookConfiguration", func() bool {
			mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "injected", metav1.GetOptions{})
			return err == nil && bytes.Equal(mwc.Webhooks[0].ClientConfig.CABundle, caPEM)
		})
		// The bundle verifies the served certificate.
		vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "injected", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		verify(t, serving.leaf, vwc.Webhooks[0].ClientConfig.CABundle)
		plain, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "not-injected", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(plain.Webhooks[0].ClientConfig.CABundle) != 0 {
			t.Errorf("the configuration without inject-ca-from got a caBundle:\n%s", plain.Webhooks[0].ClientConfig.CABundle)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		body := httpGet(ctx, t, c.CertManagerMetrics)
		want := regexp.MustCompile(`(?m)^certmanager_certificate_ready_status\{condition="True",[^}]*name="serving",namespace="certs"\} 1$`)
		if !want.MatchString(body) {
			t.Errorf("metrics at %s lack the Ready serving Certificate:\n%s", c.CertManagerMetrics, grepLines(body, "certmanager_certificate_ready_status"))
		}
	})

	t.Run("renew", func(t *testing.T) {
		// Nothing re-issued on its own so far: the new serial below is
		// the renewal's.
		crt, err := dyn.Resource(CertificatesGVR).Namespace(certNamespace).Get(ctx, "serving", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rev, _, _ := unstructured.NestedInt64(crt.Object, "status", "revision"); rev != 1 {
			t.Fatalf("serving is at revision %d before the renewal, want 1", rev)
		}
		if now := parseCert(t, "serving-tls tls.crt", getSecret(ctx, t, cs, "serving-tls").Data[corev1.TLSCertKey]); now.SerialNumber.Cmp(serving.leaf.SerialNumber) != 0 {
			t.Fatalf("serving-tls changed before the renewal: serial %s, was %s", now.SerialNumber, serving.leaf.SerialNumber)
		}
		if err := RenewCertificate(ctx, dyn, certNamespace, "serving"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "serving-tls holds a new certificate", func() bool {
			s, err := cs.CoreV1().Secrets(certNamespace).Get(ctx, "serving-tls", metav1.GetOptions{})
			if err != nil {
				return false
			}
			blk, _ := pem.Decode(s.Data[corev1.TLSCertKey])
			if blk == nil {
				return false
			}
			cert, err := x509.ParseCertificate(blk.Bytes)
			return err == nil && cert.SerialNumber.Cmp(serving.leaf.SerialNumber) != 0
		})
		waitReady(ctx, t, dyn, CertificatesGVR, "serving", 2)
		renewed := checkServing(t, getSecret(ctx, t, cs, "serving-tls"), caSecret)
		if bytes.Equal(renewed.key, serving.key) {
			t.Error("renewal with rotationPolicy Always kept the private key")
		}
		// The renewal went through the approver and the CA issuer.
		list, err := dyn.Resource(requestsGVR).Namespace(certNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, cr := range list.Items {
			if cr.GetAnnotations()["cert-manager.io/certificate-name"] != "serving" || cr.GetAnnotations()["cert-manager.io/certificate-revision"] != "2" {
				continue
			}
			found = true
			for _, cond := range []string{"Approved", "Ready"} {
				if status, reason := condition(&cr, cond); status != "True" {
					t.Errorf("CertificateRequest %s: %s=%s (%s)", cr.GetName(), cond, status, reason)
				}
			}
		}
		if !found {
			t.Errorf("no CertificateRequest for revision 2 of serving among %d", len(list.Items))
		}
		// The CA did not change: the injected bundle still verifies.
		vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "injected", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		verify(t, renewed.leaf, vwc.Webhooks[0].ClientConfig.CABundle)
	})

	t.Run("SIGTERM", func(t *testing.T) {
		i := slices.IndexFunc(c.procs, func(p *process) bool { return p.name == "cert-manager" })
		if i < 0 {
			t.Fatal("no cert-manager process recorded")
		}
		p := c.procs[i]
		if err := p.stop(15 * time.Second); err != nil {
			t.Fatal(err)
		}
		if p.err != nil {
			t.Errorf("cert-manager exited with %v after SIGTERM; last output:\n%s", p.err, tail(p.log, 30))
		}
	})
}

// waitReady waits for the object's Ready condition to be True, and for a
// Certificate also its status.revision to reach revision.
func waitReady(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string, revision int64) {
	t.Helper()
	operatortest.Eventually(t, fmt.Sprintf("%s %s Ready (revision %d)", gvr.Resource, name, revision), func() error {
		obj, err := dyn.Resource(gvr).Namespace(certNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rev, _, _ := unstructured.NestedInt64(obj.Object, "status", "revision")
		if status, _ := condition(obj, "Ready"); status == "True" && (gvr != CertificatesGVR || rev >= revision) {
			return nil
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		return fmt.Errorf("revision %d, conditions %v", rev, conds)
	}, operatortest.Within(90*time.Second), operatortest.Every(250*time.Millisecond))
}

// condition returns the status and reason of a condition of an object.
func condition(obj *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			return status, reason
		}
	}
	return "", ""
}

func getSecret(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(certNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type servingCert struct {
	leaf *x509.Certificate
	key  []byte
}

// checkServing checks a serving Secret: a TLS Secret whose key pair matches,
// whose certificate is a leaf for the requested DNS names chaining to the
// CA, and whose ca.crt is that CA.
func checkServing(t *testing.T, s, caSecret *corev1.Secret) servingCert {
	t.Helper()
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("%s has type %s, want %s", s.Name, s.Type, corev1.SecretTypeTLS)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, "ca.crt"} {
		if len(s.Data[k]) == 0 {
			t.Fatalf("%s lacks %s (keys %v)", s.Name, k, slices.Sorted(maps.Keys(s.Data)))
		}
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Errorf("%s: tls.crt and tls.key do not pair: %v", s.Name, err)
	}
	if !bytes.Equal(s.Data["ca.crt"], caSecret.Data[corev1.TLSCertKey]) {
		t.Errorf("%s ca.crt is not the CA certificate of %s", s.Name, caSecret.Name)
	}
	leaf := parseCert(t, s.Name+" tls.crt", s.Data[corev1.TLSCertKey])
	if leaf.IsCA {
		t.Errorf("%s holds a CA certificate", s.Name)
	}
	if got := slices.Sorted(slices.Values(leaf.DNSNames)); !slices.Equal(got, servingDNSNames) {
		t.Errorf("%s DNS names %v, want %v", s.Name, got, servingDNSNames)
	}
	verify(t, leaf, s.Data["ca.crt"])
	return servingCert{leaf: leaf, key: s.Data[corev1.TLSPrivateKeyKey]}
}

// verify checks that leaf chains to the CA bundle for every serving DNS name
// as a server certificate.
func verify(t *testing.T, leaf *x509.Certificate, bundle []byte) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatalf("no certificate in CA bundle:\n%s", bundle)
	}
	for _, name := range servingDNSNames {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("certificate %s does not verify for %s: %v", leaf.SerialNumber, name, err)
		}
	}
}

func parseCert(t *testing.T, what string, data []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s is no PEM certificate", what)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return cert
}

func httpGet(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(body)
}

func grepLines(text, substr string) string {
	var out []byte
	for line := range bytes.Lines([]byte(text)) {
		if bytes.Contains(line, []byte(substr)) {
			out = append(out, line...)
		}
	}
	return fmt.Sprintf("%s(%d bytes in all)", out, len(text))
}

// TestCertManagerBinaryMissing: asking for cert-manager without its binary
// fails before anything starts, naming the binary and `make control-plane`.
func TestCertManagerBinaryMissing(t *testing.T) {
	bin := t.TempDir()
	for _, name := range ClusterBinaries {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(BinDirEnv, bin)
	c, err := StartCluster(t.Context(), ClusterOptions{CertManager: true})
	if c != nil {
		t.Errorf("StartCluster returned a cluster without the cert-manager binary")
	}
	if !errors.Is(err, ErrBinariesMissing) || !strings.Contains(err.Error(), bin+": cert-manager;") || !strings.Contains(err.Error(), "make control-plane") {
		t.Fatalf("want ErrBinariesMissing naming cert-manager and make control-plane, got %v", err)
	}
}
