package glance

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// TestApplyAfterAlreadyExists: a cache that has not seen a child yet makes
// the create answer AlreadyExists; the child is read from the server and
// brought in line, with no error.
func TestApplyAfterAlreadyExists(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale client.Object
		apply func(p *pass, g *v1alpha1.Glance) error
		check func(got client.Object) bool
	}{
		{"Service through applyChild", &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 1234}}},
		}, func(p *pass, g *v1alpha1.Glance) error {
			desired := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 9292}}},
			}
			current := &corev1.Service{}
			return applyChild(context.Background(), p, g, desired, current, func() bool {
				return len(current.Spec.Ports) == 1 && current.Spec.Ports[0].Port == 9292
			}, func() { current.Spec.Ports = desired.Spec.Ports })
		}, func(got client.Object) bool { return got.(*corev1.Service).Spec.Ports[0].Port == 9292 }},
		{"Secret through ensureSecret", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-db-connection"},
			Data:       map[string][]byte{ConnectionKey: []byte("old")},
		}, func(p *pass, g *v1alpha1.Glance) error {
			return ensureSecret(context.Background(), p, g, "glance-db-connection", componentDatabase, map[string][]byte{ConnectionKey: []byte("new")})
		}, func(got client.Object) bool {
			s := got.(*corev1.Secret)
			return string(s.Data[ConnectionKey]) == "new" && s.Labels[render.LabelComponent] == componentDatabase
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := testScheme(t)
			g := fixtures.NewGlance("openstack", "glance", "2025.2")
			g.UID = "glance-uid"
			server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(g, tc.stale).Build()
			// The cached client has not seen the child.
			kind := tc.stale.DeepCopyObject().(client.Object)
			cached := interceptor.NewClient(server, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if reflect.TypeOf(obj) == reflect.TypeOf(kind) {
					return apierrors.NewNotFound(schema.GroupResource{Resource: "children"}, key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			}})
			p := &pass{cluster: &targetcluster.Cluster{Client: cached, Reader: server, Scheme: scheme}}
			if err := tc.apply(p, g); err != nil {
				t.Fatalf("apply after AlreadyExists: %v", err)
			}
			got := tc.stale.DeepCopyObject().(client.Object)
			if err := server.Get(context.Background(), client.ObjectKeyFromObject(tc.stale), got); err != nil {
				t.Fatal(err)
			}
			if !tc.check(got) || !metav1.IsControlledBy(got, g) {
				t.Errorf("the existing child was not brought in line: %+v", got)
			}
		})
	}
}
