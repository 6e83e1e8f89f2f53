package targetcluster

import (
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
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/pkg/render"
)

// The scoping of every cluster's caches lives here, so the management
// cluster and each target cluster hold the same small set of objects.

// OwnedKinds are the children the operator creates; caches hold only the
// ones carrying its managed-by label.
func OwnedKinds() []client.Object {
	return []client.Object{
		&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Service{},
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
