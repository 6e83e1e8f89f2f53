package targetcluster

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/pkg/render"
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

// The API pods are cached with what telling an image-cache eviction needs:
// their metadata and the phase, reason and message of their status.
func TestStripPodToEviction(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "glance-api-1", Namespace: "openstack", UID: "u-1", ResourceVersion: "7",
			Labels:        render.APIPodLabels("glance"),
			Annotations:   map[string]string{"kubectl.kubernetes.io/restartedAt": "now"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "glance-api", Image: "glance"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodFailed, Reason: "Evicted", Message: `Usage of EmptyDir volume "image-cache" exceeds the limit "10Gi". `,
			PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{Name: "glance-api"}},
		},
	}
	out, err := StripPodToEviction(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	want := corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: pod.Status.Message}
	if !equality.Semantic.DeepEqual(got.Status, want) || !equality.Semantic.DeepEqual(got.Spec, corev1.PodSpec{}) {
		t.Errorf("kept spec %+v and status %+v, want no spec and %+v", got.Spec, got.Status, want)
	}
	if got.UID != "u-1" || got.Labels[render.LabelInstance] != "glance" || got.ManagedFields != nil || got.Annotations != nil {
		t.Errorf("metadata %+v, want the identity and labels only", got.ObjectMeta)
	}
	opts := CacheOptions(nil)
	var scoped bool
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			scoped = by.Label.Matches(labels.Set(render.APIPodLabels("glance"))) &&
				!by.Label.Matches(labels.Set(render.ChildLabels("glance", render.ComponentDBPurge))) && by.Transform != nil
		}
	}
	if !scoped {
		t.Error("the pods' cache is not scoped to the API pods, or keeps them whole")
	}
	if kinds := CachedKinds(); !slices.ContainsFunc(kinds, func(o client.Object) bool { _, ok := o.(*corev1.Pod); return ok }) {
		t.Error("the caches do not hold the API pods")
	}
}
