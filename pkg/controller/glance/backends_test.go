package glance

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// TestUnreadableCredentialsSkipOneBackend: a backend whose credentials
// Secret cannot be read (here: Forbidden) is skipped with an event, and its
// sibling still projects; the step does not fail.
func TestUnreadableCredentialsSkipOneBackend(t *testing.T) {
	scheme := testScheme(t)
	const ns = "openstack"
	ready := func(b *v1alpha1.GlanceBackend) *v1alpha1.GlanceBackend {
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionCredentialsReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCredentialsAvailable})
		return b
	}
	g := fixtures.NewGlance(ns, "glance", "2025.2")
	objs := []client.Object{
		g,
		ready(fixtures.NewBackend(ns, "alpha", "glance", true, "alpha-s3")),
		ready(fixtures.NewBackend(ns, "beta", "glance", false, "beta-s3")),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-s3"}, Data: map[string][]byte{v1alpha1.S3AccessKeyIDKey: []byte("ak"), v1alpha1.S3SecretAccessKeyKey: []byte("sk")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "beta-s3"}, Data: map[string][]byte{v1alpha1.S3AccessKeyIDKey: []byte("ak"), v1alpha1.S3SecretAccessKeyKey: []byte("sk")}},
	}
	c := withIndexes(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)).
		WithStatusSubresource(&v1alpha1.GlanceBackend{}).
		WithIndex(&v1alpha1.GlanceBackend{}, v1alpha1.IndexBackendGlance, func(o client.Object) []string {
			return []string{o.(*v1alpha1.GlanceBackend).Spec.GlanceRef.Name}
		}).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && key.Name == "beta-s3" {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, nil)
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	recorder := events.NewFakeRecorder(10)
	p := &pass{
		r:       &Reconciler{Client: c, Recorder: recorder},
		cluster: &targetcluster.Cluster{Client: c, Reader: c, Scheme: scheme},
	}
	if _, err := reconcileBackends(context.Background(), g, p); err != nil {
		t.Fatalf("the Backends step failed on one unreadable Secret: %v", err)
	}
	cond := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionBackendsReady)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "projected alpha") || strings.Contains(cond.Message, "projected alpha, beta") {
		t.Errorf("BackendsReady = %+v, want alpha projected without beta", cond)
	}
	select {
	case ev := <-recorder.Events:
		if !strings.Contains(ev, "GlanceBackendSkipped") || !strings.Contains(ev, `"beta"`) || !strings.Contains(ev, "cannot be read") {
			t.Errorf("event %q, want GlanceBackendSkipped naming beta's unreadable Secret", ev)
		}
	default:
		t.Error("no GlanceBackendSkipped event")
	}

	// The next pass skips beta again, which its status already says: no
	// second event.
	if _, err := reconcileBackends(context.Background(), g, p); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-recorder.Events:
		t.Errorf("a pass repeating the skip emitted %q", ev)
	default:
	}
}

// skippedIn reads back the skipped backends of every message backendNotes
// writes, and nothing from one without them.
func TestSkippedInReadsBackendNotes(t *testing.T) {
	for _, tc := range []struct{ waiting, skipped []string }{
		{nil, nil},
		{[]string{"gamma"}, nil},
		{nil, []string{"beta"}},
		{[]string{"gamma", "delta"}, []string{"beta", "alpha-2"}},
	} {
		msg := "projected alpha (default alpha) into Secret glance-backends-x" + backendNotes(tc.waiting, tc.skipped)
		if got := skippedIn(msg); !slices.Equal(got, tc.skipped) {
			t.Errorf("skippedIn(%q) = %q, want %q", msg, got, tc.skipped)
		}
	}
}

// withIndexes gives a fake client the field indexes of the children the
// steps list by, as pkg/operator registers them.
func withIndexes(b *fake.ClientBuilder) *fake.ClientBuilder {
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &batchv1.Job{}} {
		b = b.WithIndex(obj, v1alpha1.IndexChildComponent, render.ChildComponentIndex)
	}
	return b.WithIndex(&discoveryv1.EndpointSlice{}, v1alpha1.IndexEndpointSliceService, render.EndpointSliceServiceIndex)
}

// testScheme knows the built-in kinds and the operator's.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// backendSpec is a GlanceBackend of the Glance glance for the default-backend
// table: credentials is the CredentialsReady status ("" leaves it unset).
type backendSpec struct {
	name        string
	isDefault   bool
	credentials metav1.ConditionStatus
	deleting    bool
}

func (b backendSpec) objects() []client.Object {
	gb := fixtures.NewBackend("openstack", b.name, "glance", b.isDefault, b.name+"-s3")
	if b.credentials != "" {
		meta.SetStatusCondition(&gb.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionCredentialsReady, Status: b.credentials, Reason: "Checked", Message: "checked"})
	}
	if b.deleting {
		gb.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_800_000_000, 0)}
		gb.Finalizers = []string{"glance.openstack.c5c3.io/backend"}
	}
	return []client.Object{gb, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: b.name + "-s3"},
		Data:       map[string][]byte{v1alpha1.S3AccessKeyIDKey: []byte("ak"), v1alpha1.S3SecretAccessKeyKey: []byte("sk")},
	}}
}

// backendsPass runs the Backends step over the backends given and returns
// the pass and BackendsReady. The Glance's backends are listed without the
// field index the manager registers, every backend of the namespace
// belonging to the Glance, and in reverse name order so that the step's own
// ordering shows.
func backendsPass(t *testing.T, backends []backendSpec, objs ...client.Object) (*pass, *metav1.Condition, client.Client) {
	t.Helper()
	scheme := testScheme(t)
	for _, b := range backends {
		objs = append(objs, b.objects()...)
	}
	c := withIndexes(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			backends, ok := list.(*v1alpha1.GlanceBackendList)
			if !ok {
				return c.List(ctx, list, opts...)
			}
			o := client.ListOptions{}
			o.ApplyOptions(opts)
			if err := c.List(ctx, backends, client.InNamespace(o.Namespace)); err != nil {
				return err
			}
			slices.Reverse(backends.Items)
			return nil
		}}).Build()
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	g.UID = "glance-uid"
	p := &pass{
		r:       &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100)},
		cluster: &targetcluster.Cluster{Client: c, Reader: c, Scheme: scheme},
	}
	if _, err := reconcileBackends(context.Background(), g, p); err != nil {
		t.Fatalf("the Backends step failed: %v", err)
	}
	cond := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionBackendsReady)
	if cond == nil {
		t.Fatal("no BackendsReady")
	}
	return p, cond, c
}

// TestDefaultBackendRules: a projection is valid with exactly one
// credential-ready default among the backends not being deleted; otherwise
// the last good configuration stays.
func TestDefaultBackendRules(t *testing.T) {
	ready := metav1.ConditionTrue
	const keeping = "; keeping the last good configuration"
	for _, tt := range []struct {
		name     string
		backends []backendSpec
		reason   string
		// message is BackendsReady's; for a valid projection, up to the
		// Secret's name, which is a hash.
		message, notes string
		// defaultBackend is empty for an invalid projection.
		defaultBackend string
		enabled        string
	}{
		{"none attached", nil, v1alpha1.ReasonWaitingForBackends, "no GlanceBackend is attached", "", "", ""},
		{"the only one being deleted", []backendSpec{{"alpha", true, ready, true}},
			v1alpha1.ReasonWaitingForBackends, "no GlanceBackend is attached", "", "", ""},
		{"one default", []backendSpec{{"alpha", true, ready, false}},
			v1alpha1.ReasonAllBackendsProjected, "projected alpha (default alpha) into Secret ", "", "alpha", "alpha:s3"},
		{"one default among others, in name order", []backendSpec{{"alpha", false, ready, false}, {"beta", true, ready, false}, {"gamma", false, ready, false}},
			v1alpha1.ReasonAllBackendsProjected, "projected alpha, beta, gamma (default beta) into Secret ", "", "beta", "alpha:s3,beta:s3,gamma:s3"},
		{"no default", []backendSpec{{"alpha", false, ready, false}, {"beta", false, ready, false}},
			v1alpha1.ReasonNoDefaultBackend, "none of the rendered backends is the default" + keeping, "", "", ""},
		{"several defaults", []backendSpec{{"alpha", true, ready, false}, {"beta", false, ready, false}, {"gamma", true, ready, false}},
			v1alpha1.ReasonNoDefaultBackend, "the rendered backends alpha, gamma are all marked default" + keeping, "", "", ""},
		// A default on its way out no longer counts: the other one is it.
		{"several defaults, one being deleted", []backendSpec{{"alpha", true, ready, true}, {"beta", false, ready, false}, {"gamma", true, ready, false}},
			v1alpha1.ReasonAllBackendsProjected, "projected beta, gamma (default gamma) into Secret ", "", "gamma", "beta:s3,gamma:s3"},
		{"the default being deleted", []backendSpec{{"alpha", true, ready, true}, {"beta", false, ready, false}},
			v1alpha1.ReasonNoDefaultBackend, "none of the rendered backends is the default" + keeping, "", "", ""},
		// A default not rendered does not count either; the others are not
		// promoted.
		{"the default's credentials not ready", []backendSpec{{"alpha", true, metav1.ConditionFalse, false}, {"beta", false, ready, false}},
			v1alpha1.ReasonNoDefaultBackend, "none of the rendered backends is the default" + keeping, "; skipped alpha (see events)", "", ""},
		{"the default's credentials not judged yet", []backendSpec{{"alpha", true, "", false}, {"beta", false, ready, false}},
			v1alpha1.ReasonNoDefaultBackend, "none of the rendered backends is the default" + keeping, "; waiting for the credentials of alpha", "", ""},
		{"a second default not ready", []backendSpec{{"alpha", true, ready, false}, {"beta", true, metav1.ConditionUnknown, false}},
			v1alpha1.ReasonAllBackendsProjected, "projected alpha (default alpha) into Secret ", "; waiting for the credentials of beta", "alpha", "alpha:s3"},
		{"none rendered", []backendSpec{{"alpha", true, metav1.ConditionFalse, false}, {"beta", false, metav1.ConditionFalse, false}},
			v1alpha1.ReasonNoDefaultBackend, "no attached GlanceBackend has ready credentials" + keeping, "; skipped alpha, beta (see events)", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, cond, c := backendsPass(t, tt.backends)
			valid := tt.defaultBackend != ""
			if p.backends.valid != valid || p.backends.defaultBackend != tt.defaultBackend {
				t.Errorf("projection valid %v with default %q, want %v with %q", p.backends.valid, p.backends.defaultBackend, valid, tt.defaultBackend)
			}
			wantStatus, wantMessage := metav1.ConditionFalse, tt.message+tt.notes
			if valid {
				wantStatus, wantMessage = metav1.ConditionTrue, tt.message+p.backends.secretName+tt.notes
			}
			if cond.Status != wantStatus || cond.Reason != tt.reason || cond.Message != wantMessage {
				t.Errorf("BackendsReady %s/%s %q, want %s/%s %q", cond.Status, cond.Reason, cond.Message, wantStatus, tt.reason, wantMessage)
			}
			if !valid {
				// No Deployment runs yet: there is no last good Secret.
				if p.backends.secretName != "" {
					t.Errorf("an invalid projection mounts %q, want nothing", p.backends.secretName)
				}
				return
			}
			secret := &corev1.Secret{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: p.backends.secretName}, secret); err != nil {
				t.Fatalf("the backends Secret: %v", err)
			}
			conf := string(secret.Data[BackendsConfKey]) + secret.StringData[BackendsConfKey]
			if !strings.Contains(conf, "enabled_backends = "+tt.enabled+"\n") && !strings.Contains(conf, "enabled_backends="+tt.enabled+"\n") {
				t.Errorf("backends.conf does not enable %s:\n%s", tt.enabled, conf)
			}
		})
	}
}

// TestInvalidProjectionKeepsTheLiveSecret: an invalid projection leaves the
// Deployment on the backends Secret it runs with; a valid one moves it to
// the new Secret without pruning the live one.
func TestInvalidProjectionKeepsTheLiveSecret(t *testing.T) {
	live := func() []client.Object {
		return []client.Object{
			&appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
				Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
					{Name: render.VolumeBackends, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "glance-backends-live"}}},
				}}}},
			},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-backends-live", Labels: childLabels(fixtures.NewGlance("openstack", "glance", "2025.2"), componentBackends)},
				Data: map[string][]byte{BackendsConfKey: []byte("[DEFAULT]\nenabled_backends = old:s3\n\n[old]\ns3_store_host = http://old.example.com:9000\n")}},
		}
	}
	p, cond, _ := backendsPass(t, []backendSpec{{"alpha", false, metav1.ConditionTrue, false}}, live()...)
	if p.backends.valid || p.backends.secretName != "glance-backends-live" || cond.Reason != v1alpha1.ReasonNoDefaultBackend {
		t.Errorf("invalid projection: valid %v, mounting %q, %s; want the live Secret kept", p.backends.valid, p.backends.secretName, cond.Reason)
	}
	if !slices.Contains(p.backends.endpoints, "http://old.example.com:9000") {
		t.Errorf("egress endpoints %v, want the live Secret's store", p.backends.endpoints)
	}

	p, cond, c := backendsPass(t, []backendSpec{{"alpha", true, metav1.ConditionTrue, false}}, live()...)
	if !p.backends.valid || p.backends.secretName == "glance-backends-live" || cond.Status != metav1.ConditionTrue {
		t.Errorf("valid projection: valid %v, mounting %q, %s; want a new Secret", p.backends.valid, p.backends.secretName, cond.Status)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance-backends-live"}, &corev1.Secret{}); err != nil {
		t.Errorf("the live Secret is gone before the Deployment left it: %v", err)
	}
	for _, host := range []string{"http://old.example.com:9000", "http://s3.example.com:9000"} {
		if !slices.Contains(p.backends.endpoints, host) {
			t.Errorf("egress endpoints %v, want %s", p.backends.endpoints, host)
		}
	}
}

// testCAPEM is a self-signed CA certificate in PEM.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// S3CABundle takes PEM certificates and nothing else, under the key the
// reference names or ca.crt, and never quotes the value in its problem.
func TestS3CABundle(t *testing.T) {
	ca := testCAPEM(t)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("not-a-key")})
	cases := []struct {
		name    string
		data    map[string][]byte
		ref     v1alpha1.SecretKeySelector
		problem string
	}{
		{"default key", map[string][]byte{"ca.crt": ca}, v1alpha1.SecretKeySelector{Name: "ca"}, ""},
		{"named key, two certificates", map[string][]byte{"bundle.pem": append(append([]byte{}, ca...), ca...)}, v1alpha1.SecretKeySelector{Name: "ca", Key: "bundle.pem"}, ""},
		{"key missing", map[string][]byte{"other": ca}, v1alpha1.SecretKeySelector{Name: "ca"}, `lacks key "ca.crt"`},
		{"not PEM", map[string][]byte{"ca.crt": []byte("secret-looking text")}, v1alpha1.SecretKeySelector{Name: "ca"}, `key "ca.crt" holds something other than PEM certificates`},
		{"a private key beside the certificate", map[string][]byte{"ca.crt": append(append([]byte{}, ca...), keyPEM...)}, v1alpha1.SecretKeySelector{Name: "ca"}, `key "ca.crt" holds a PEM EC PRIVATE KEY block, not only certificates`},
		{"a certificate block that does not parse", map[string][]byte{"ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})}, v1alpha1.SecretKeySelector{Name: "ca"}, `key "ca.crt" holds a certificate that does not parse`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bundle, problem := S3CABundle(&corev1.Secret{Data: tc.data}, &tc.ref)
			if !strings.HasPrefix(problem, tc.problem) || (tc.problem == "") != (problem == "") {
				t.Errorf("problem %q, want %q", problem, tc.problem)
			}
			if tc.problem == "" && bundle != string(tc.data[cmp.Or(tc.ref.Key, "ca.crt")]) {
				t.Errorf("bundle %q, want the key's PEM", bundle)
			}
			if tc.problem != "" && (bundle != "" || strings.Contains(problem, "secret-looking")) {
				t.Errorf("a refused bundle returned %q with problem %q", bundle, problem)
			}
		})
	}
}

// TestBackendCABundleProjected: a backend's CA bundle goes into the
// backends Secret beside backends.conf, whose section points
// s3_store_cacert at it where the Deployment mounts the Secret; a backend
// whose CA bundle Secret is missing is skipped with the reason, and its
// sibling projects.
func TestBackendCABundleProjected(t *testing.T) {
	ca := testCAPEM(t)
	// Each backend's objects, its https host verified against the Secret
	// caSecret names.
	withCA := func(b backendSpec, caSecret string) []client.Object {
		objs := b.objects()
		gb := objs[0].(*v1alpha1.GlanceBackend)
		gb.Spec.S3.Host = "https://s3.example.com"
		gb.Spec.S3.CABundleSecretRef = &v1alpha1.SecretKeySelector{Name: caSecret}
		return objs
	}
	objs := append(withCA(backendSpec{"alpha", true, metav1.ConditionTrue, false}, "alpha-ca"),
		withCA(backendSpec{"beta", false, metav1.ConditionTrue, false}, "beta-ca")...)
	objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "alpha-ca"}, Data: map[string][]byte{"ca.crt": ca}})
	p, cond, c := backendsPass(t, nil, objs...)
	if cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "projected alpha (default alpha)") || !strings.Contains(cond.Message, "skipped beta") {
		t.Fatalf("BackendsReady = %+v, want alpha projected and beta skipped", cond)
	}
	skipped := false
	for len(p.r.Recorder.(*events.FakeRecorder).Events) > 0 {
		ev := <-p.r.Recorder.(*events.FakeRecorder).Events
		skipped = skipped || strings.Contains(ev, `its CA bundle Secret "beta-ca" does not exist`)
	}
	if !skipped {
		t.Error("no event says beta's CA bundle Secret does not exist")
	}
	var secrets corev1.SecretList
	if err := c.List(context.Background(), &secrets, client.InNamespace("openstack"), client.MatchingLabels{render.LabelComponent: componentBackends}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 {
		t.Fatalf("%d backends Secrets, want 1", len(secrets.Items))
	}
	data := secrets.Items[0].StringData
	if got := data[render.S3CABundleKey("alpha")]; got != string(ca) {
		t.Errorf("the backends Secret's %s = %q, want the CA bundle", render.S3CABundleKey("alpha"), got)
	}
	if _, ok := data[render.S3CABundleKey("beta")]; ok {
		t.Error("the skipped beta's CA bundle key is in the backends Secret")
	}
	if want := "s3_store_cacert = " + render.BackendsDir + "alpha.ca.crt"; !strings.Contains(data[BackendsConfKey], want) {
		t.Errorf("backends.conf lacks %q:\n%s", want, data[BackendsConfKey])
	}
}
