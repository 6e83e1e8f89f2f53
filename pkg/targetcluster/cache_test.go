package targetcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The references caches keep, of each user Secret and ConfigMap, only what
// maps it to the Glances reading it.
func TestStripToIdentity(t *testing.T) {
	m := metadataOf("Secret")
	m.ObjectMeta = metav1.ObjectMeta{
		Name: "glance-db", Namespace: "openstack", UID: types.UID("u-1"), ResourceVersion: "42",
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": "y"},
		Finalizers: []string{"f"}, OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}, Generation: 3,
	}
	out, err := StripToIdentity(m)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	want := metav1.ObjectMeta{Name: "glance-db", Namespace: "openstack", UID: "u-1", ResourceVersion: "42"}
	if got.ObjectMeta.String() != want.String() {
		t.Errorf("kept %+v, want only the identity %+v", got.ObjectMeta, want)
	}
	if got.Kind != "Secret" {
		t.Errorf("kind %q, want Secret kept", got.Kind)
	}
}
