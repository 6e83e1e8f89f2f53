package glance

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// TestApplyChildAfterAlreadyExists: a cache that has not seen a child yet
// makes the create answer AlreadyExists; the child is read from the server
// and brought in line, without an error.
func TestApplyChildAfterAlreadyExists(t *testing.T) {
	scheme := testScheme(t)
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	g.UID = "glance-uid"
	stale := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 1234}}},
	}
	server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(g, stale).Build()
	// The cached client has not seen the Service.
	cached := interceptor.NewClient(server, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Service); ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, key.Name)
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	p := &pass{cluster: &targetcluster.Cluster{Client: cached, Reader: server, Scheme: scheme}}
	desired := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 9292}}},
	}
	current := &corev1.Service{}
	err := applyChild(context.Background(), p, g, desired, current, func() bool {
		return len(current.Spec.Ports) == 1 && current.Spec.Ports[0].Port == 9292
	}, func() { current.Spec.Ports = desired.Spec.Ports })
	if err != nil {
		t.Fatalf("applyChild after AlreadyExists: %v", err)
	}
	var got corev1.Service
	if err := server.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Ports[0].Port != 9292 || !metav1.IsControlledBy(&got, g) {
		t.Errorf("the existing Service was not brought in line: ports %+v, owners %+v", got.Spec.Ports, got.OwnerReferences)
	}
}

// TestEnsureSecretAfterAlreadyExists: a Secret the cache has not seen yet is
// read from the server and brought in line, with no error.
func TestEnsureSecretAfterAlreadyExists(t *testing.T) {
	scheme := testScheme(t)
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	g.UID = "glance-uid"
	stale := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-db-connection"},
		Data:       map[string][]byte{ConnectionKey: []byte("old")},
	}
	server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(g, stale).Build()
	cached := interceptor.NewClient(server, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	p := &pass{cluster: &targetcluster.Cluster{Client: cached, Reader: server, Scheme: scheme}}
	if err := ensureSecret(context.Background(), p, g, "glance-db-connection", componentDatabase, map[string][]byte{ConnectionKey: []byte("new")}); err != nil {
		t.Fatalf("ensureSecret after AlreadyExists: %v", err)
	}
	var got corev1.Secret
	if err := server.Get(context.Background(), client.ObjectKeyFromObject(stale), &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data[ConnectionKey]) != "new" || !metav1.IsControlledBy(&got, g) || got.Labels[render.LabelComponent] != componentDatabase {
		t.Errorf("the existing Secret was not brought in line: data %q, owners %+v, labels %v", got.Data[ConnectionKey], got.OwnerReferences, got.Labels)
	}
}
