package glance

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
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
