package targetcluster

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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

// The main cache serves Secrets as metadata only: asked for whole Secrets
// (typed or unstructured, one or a list, an informer or an index), it
// refuses instead of starting a watch that would keep their data.
func TestNewCacheRefusesSecretData(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	under := &recordingCache{}
	c := &metadataOnlySecrets{Cache: under, scheme: scheme}
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "ns", Name: "glance-db-connection"}
	unstructuredSecret := &unstructured.Unstructured{}
	unstructuredSecret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	refused := map[string]error{
		"Get Secret":                 c.Get(ctx, key, &corev1.Secret{}),
		"Get unstructured Secret":    c.Get(ctx, key, unstructuredSecret),
		"List SecretList":            c.List(ctx, &corev1.SecretList{}),
		"IndexField Secret":          c.IndexField(ctx, &corev1.Secret{}, "f", func(client.Object) []string { return nil }),
		"GetInformerForKind Secret":  errOf(c.GetInformerForKind(ctx, corev1.SchemeGroupVersion.WithKind("Secret"))),
		"GetInformer Secret":         errOf(c.GetInformer(ctx, &corev1.Secret{})),
		"GetInformer unstructured":   errOf(c.GetInformer(ctx, unstructuredSecret)),
		"List unstructured Secrets":  c.List(ctx, unstructuredList("SecretList")),
		"GetInformerForKind Secrets": errOf(c.GetInformerForKind(ctx, corev1.SchemeGroupVersion.WithKind("SecretList"))),
	}
	for name, err := range refused {
		if !errors.Is(err, ErrSecretData) {
			t.Errorf("%s: %v, want ErrSecretData", name, err)
		}
	}
	if under.calls != 0 {
		t.Errorf("%d refused calls reached the cache", under.calls)
	}
	served := map[string]error{
		"Get Secret metadata":   c.Get(ctx, key, metadataOf("Secret")),
		"List Secret metadata":  c.List(ctx, metadataListOf("SecretList")),
		"GetInformer metadata":  errOf(c.GetInformer(ctx, metadataOf("Secret"))),
		"IndexField metadata":   c.IndexField(ctx, metadataOf("Secret"), "f", func(client.Object) []string { return nil }),
		"Get ConfigMap":         c.Get(ctx, key, &corev1.ConfigMap{}),
		"GetInformerForKind CM": errOf(c.GetInformerForKind(ctx, corev1.SchemeGroupVersion.WithKind("ConfigMap"))),
	}
	for name, err := range served {
		if err != nil {
			t.Errorf("%s: %v, want it served", name, err)
		}
	}
	if under.calls != len(served) {
		t.Errorf("%d calls reached the cache, want %d", under.calls, len(served))
	}
	// The owned Secrets are cached, and watched, as metadata.
	for _, obj := range OwnedKinds() {
		if _, ok := obj.(*corev1.Secret); ok {
			t.Error("OwnedKinds holds the typed Secret: its watch would keep every child Secret's data")
		}
	}
}

func errOf(_ cache.Informer, err error) error { return err }

func unstructuredList(kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return l
}

func metadataListOf(kind string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return l
}

// recordingCache counts the calls it serves, answering each with nothing.
type recordingCache struct {
	cache.Cache
	calls int
}

func (c *recordingCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	c.calls++
	return nil
}

func (c *recordingCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	c.calls++
	return nil
}

func (c *recordingCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	c.calls++
	return nil, nil
}

func (c *recordingCache) GetInformerForKind(context.Context, schema.GroupVersionKind, ...cache.InformerGetOption) (cache.Informer, error) {
	c.calls++
	return nil, nil
}

func (c *recordingCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	c.calls++
	return nil
}
