package targetcluster

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/c5c3/glance-operator/pkg/render"
)

// The scoping of every cluster's caches lives here, so the management
// cluster and each target cluster hold the same small set of objects.

// OwnedKinds are the children the operator creates; caches hold only the
// ones carrying its managed-by label. Secrets are held as metadata only
// (see NewCache): they carry credentials, which the operator keeps no copy
// of.
func OwnedKinds() []client.Object {
	return []client.Object{
		metadataOf("Secret"), &corev1.ConfigMap{}, &corev1.Service{},
		&appsv1.Deployment{}, &policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{},
		&networkingv1.NetworkPolicy{}, &batchv1.Job{}, &batchv1.CronJob{},
	}
}

// CachedKinds are what the main cache of a cluster holds: the owned kinds,
// the EndpointSlices of the API Services and the API pods.
func CachedKinds() []client.Object {
	return append(OwnedKinds(), &discoveryv1.EndpointSlice{}, &corev1.Pod{})
}

// CacheOptions scope a cluster's main cache to the operator's children in
// namespaces (empty means all): the owned kinds by the managed-by label, and
// the EndpointSlices of the API Services. Scheme, Mapper and HTTPClient are
// left to the caller (cluster.New and the manager fill them in).
func CacheOptions(namespaces []string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy})
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range OwnedKinds() {
		byObject[obj] = cache.ByObject{Label: managed}
	}
	// The HealthCheck reads the slices of the API Services only. The
	// EndpointSlice controller copies a Service's labels onto its slices,
	// so those carry the operator's labels too.
	api := labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy, render.LabelComponent: render.ComponentAPI})
	byObject[&discoveryv1.EndpointSlice{}] = cache.ByObject{Label: api}
	// The Deployment step reads the API pods for those the kubelet evicted
	// for their image cache. There are replicas times Glances of them, so
	// each keeps only what that needs.
	byObject[&corev1.Pod{}] = cache.ByObject{Label: api, Transform: StripPodToEviction}
	return cache.Options{
		DefaultNamespaces: namespaceConfigs(namespaces),
		ByObject:          byObject,
		DefaultTransform:  cache.TransformStripManagedFields(),
	}
}

// NewCache builds a cluster's main cache (CacheOptions), which holds
// Secrets as metadata only: a typed or unstructured Secret asked of it is
// refused rather than watched, as that watch would keep the data of every
// child Secret (a DSN, a database password, S3 keys) in memory. A child
// Secret's data is read from the API server where the operator must know
// it.
func NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &metadataOnlySecrets{Cache: c, scheme: opts.Scheme}, nil
}

// metadataOnlySecrets is a cache that serves Secrets as metadata only.
type metadataOnlySecrets struct {
	cache.Cache
	scheme *runtime.Scheme
}

// ErrSecretData is what a cache of NewCache answers when asked for a
// Secret's data.
var ErrSecretData = errors.New("the cache holds Secrets as metadata only: read a Secret as metav1.PartialObjectMetadata, or its data from the API server")

// refuse fails for a Secret or SecretList that is not metadata only.
func (c *metadataOnlySecrets) refuse(obj runtime.Object) error {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		// The cache names the trouble.
		return nil
	}
	return refuseKind(gvk)
}

func refuseKind(gvk schema.GroupVersionKind) error {
	if gvk.Group == "" && (gvk.Kind == "Secret" || gvk.Kind == "SecretList") {
		return fmt.Errorf("%s: %w", gvk.Kind, ErrSecretData)
	}
	return nil
}

func (c *metadataOnlySecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.refuse(obj); err != nil {
		return err
	}
	return c.Cache.Get(ctx, key, obj, opts...)
}

func (c *metadataOnlySecrets) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.refuse(list); err != nil {
		return err
	}
	return c.Cache.List(ctx, list, opts...)
}

func (c *metadataOnlySecrets) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if err := c.refuse(obj); err != nil {
		return nil, err
	}
	return c.Cache.GetInformer(ctx, obj, opts...)
}

// GetInformerForKind gives the informer of whole objects, so it refuses a
// Secret.
func (c *metadataOnlySecrets) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if err := refuseKind(gvk); err != nil {
		return nil, err
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

func (c *metadataOnlySecrets) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if err := c.refuse(obj); err != nil {
		return err
	}
	return c.Cache.IndexField(ctx, obj, field, extract)
}

// ClientOptions make a cluster's client read the optional APIs' objects
// (SecretStores, MariaDB, its Database, User and Grant) from the cache, as
// it reads the typed children: the controller watches them, so the cache
// holds them, and an uncached GET of each in every pass is what made a
// Glance at rest cost several API reads per recheck.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// ReferencesCacheOptions are the options of each namespace's references
// cache (see References): the user's Secrets and ConfigMaps, watched
// there because the main cache holds only the operator's children,
// metadata-only and stripped to their identity; a Secret is read from the
// API server when its resourceVersion moved (SecretReader, which keeps what
// was derived from it, not its values), a ConfigMap when a Glance needs it. Scheme, Mapper and HTTPClient are left to the caller.
func ReferencesCacheOptions() cache.Options {
	return cache.Options{DefaultTransform: StripToIdentity}
}

// ReferenceKinds are what the references cache holds: the user's Secrets
// and ConfigMaps, as metadata.
func ReferenceKinds() []client.Object {
	return []client.Object{metadataOf("Secret"), metadataOf("ConfigMap")}
}

func metadataOf(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}

// StripToIdentity keeps what a watch needs to map an object to the Glances
// reading it: its name, namespace, UID and resourceVersion. The references
// caches hold every Secret and ConfigMap of the watched namespaces, most of
// them no Glance's, so their labels, annotations and the rest are dropped
// rather than kept for each.
func StripToIdentity(in any) (any, error) {
	if m, ok := in.(*metav1.PartialObjectMetadata); ok {
		m.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
		return m, nil
	}
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil
	}
	obj.SetManagedFields(nil)
	obj.SetAnnotations(nil)
	obj.SetLabels(nil)
	obj.SetOwnerReferences(nil)
	return in, nil
}

// StripPodToEviction keeps of a Pod what telling an eviction needs: its
// metadata (identity, labels, owner) and its status phase, reason and
// message. The spec and the container statuses, most of a Pod's size, go.
func StripPodToEviction(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	pod.ManagedFields = nil
	pod.Annotations = nil
	pod.Spec = corev1.PodSpec{}
	pod.Status = corev1.PodStatus{Phase: pod.Status.Phase, Reason: pod.Status.Reason, Message: pod.Status.Message}
	return pod, nil
}

func namespaceConfigs(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	configs := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		configs[ns] = cache.Config{}
	}
	return configs
}
