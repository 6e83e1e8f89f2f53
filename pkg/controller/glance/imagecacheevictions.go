package glance

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// A cache-maintenance sidecar whose pruner never runs lets the image cache
// grow to its emptyDir bound, and the kubelet then evicts the pod: outside
// the eviction API, so nothing but the pod's own status says why. The
// Deployment step reads those statuses and names the cause, once per pod.

// maxImageCacheEvictedPods bounds status.imageCacheEvictedPods; the CRD's
// MaxItems marker holds the same number. An evicted pod stays until the
// pod garbage collector's cluster-wide threshold, so a cache that keeps
// filling can leave more than this behind.
const maxImageCacheEvictedPods = 128

// evictedReason is the pod status reason the kubelet sets on a pod it
// evicted.
const evictedReason = "Evicted"

// imageCacheEvictionMessage matches the kubelet's message for an emptyDir
// over its sizeLimit when the volume is the image cache, and captures the
// limit: `Usage of EmptyDir volume "image-cache" exceeds the limit "10Gi". `
var imageCacheEvictionMessage = regexp.MustCompile(
	`EmptyDir volume "` + regexp.QuoteMeta(render.VolumeImageCache) + `" exceeds the limit "([^"]*)"`)

// imageCacheEvicted says whether the kubelet evicted pod because its
// image-cache emptyDir exceeded its sizeLimit. Other evictions (node
// pressure, another volume) are the cluster's business, not the cache's.
func imageCacheEvicted(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == evictedReason &&
		imageCacheEvictionMessage.MatchString(pod.Status.Message)
}

// imageCacheEvictionLimit is the limit the kubelet's message names, when it
// parses as a quantity: the message is free text, and only a quantity goes
// into an event.
func imageCacheEvictionLimit(pod *corev1.Pod) (string, bool) {
	m := imageCacheEvictionMessage.FindStringSubmatch(pod.Status.Message)
	if m == nil {
		return "", false
	}
	q, err := resource.ParseQuantity(m[1])
	if err != nil {
		return "", false
	}
	return q.String(), true
}

// imageCacheEvictions decides, from the Glance's API pods and the UIDs
// status.imageCacheEvictedPods holds, which evicted pods are counted now
// (fresh, oldest first) and what the status records next: the counted pods
// that are still there, in their recorded order, then the fresh ones. A
// counted pod that is gone is dropped, as it can never be seen again. Past
// the bound a pod is left uncounted until earlier ones are gone: at worst
// late, never counted twice.
func imageCacheEvictions(pods []corev1.Pod, counted []types.UID) (evicted, fresh []*corev1.Pod, record []types.UID) {
	evicted = make([]*corev1.Pod, 0, len(pods))
	present := sets.New[types.UID]()
	for i := range pods {
		if imageCacheEvicted(&pods[i]) {
			evicted = append(evicted, &pods[i])
			present.Insert(pods[i].UID)
		}
	}
	for _, uid := range counted {
		if present.Has(uid) && len(record) < maxImageCacheEvictedPods {
			record = append(record, uid)
		}
	}
	sort.Slice(evicted, func(a, b int) bool {
		ta, tb := evicted[a].CreationTimestamp, evicted[b].CreationTimestamp
		if !ta.Equal(&tb) {
			return ta.Before(&tb)
		}
		return evicted[a].Name < evicted[b].Name
	})
	recorded := sets.New(record...)
	for _, pod := range evicted {
		if recorded.Has(pod.UID) || len(record) >= maxImageCacheEvictedPods {
			continue
		}
		fresh = append(fresh, pod)
		record = append(record, pod.UID)
	}
	return evicted, fresh, record
}

// observeImageCacheEvictions lists the Glance's API pods, records the
// evictions of their image cache in status.imageCacheEvictedPods, and
// counts and announces each fresh one once that status is stored. It
// returns how many of the pods still there were evicted for the image
// cache, for DeploymentReady's message.
func observeImageCacheEvictions(ctx context.Context, p *pass, g *v1alpha1.Glance) (int, error) {
	var pods corev1.PodList
	if err := p.cluster.Client.List(ctx, &pods, client.InNamespace(g.Namespace), client.MatchingLabels(render.APIPodLabels(g.Name))); err != nil {
		return 0, fmt.Errorf("list the API pods: %w", err)
	}
	evicted, fresh, record := imageCacheEvictions(pods.Items, g.Status.ImageCacheEvictedPods)
	g.Status.ImageCacheEvictedPods = record
	if len(fresh) == 0 {
		return len(evicted), nil
	}
	namespace, name := g.Namespace, g.Name
	pipeline.AfterStatusWrite(ctx, func() {
		p.r.Metrics.ImageCacheEvictions.WithLabelValues(name, namespace).Add(float64(len(fresh)))
	})
	for _, pod := range fresh {
		limit := "its size limit"
		if l, ok := imageCacheEvictionLimit(pod); ok {
			limit = "its size limit of " + l
		}
		// The pod may live on a target cluster, where the Glance is not:
		// the note names it rather than relating it.
		announce(ctx, p, g, nil, corev1.EventTypeWarning, v1alpha1.EventImageCacheEvicted, "Evict",
			"the kubelet evicted pod %s: its %s emptyDir exceeded %s; is the cache-maintenance sidecar pruning?",
			pod.Name, render.VolumeImageCache, limit)
	}
	return len(evicted), nil
}

// evictedForImageCache appends to a DeploymentReady message that names
// missing replicas how many of the Glance's pods the kubelet evicted for
// the image cache.
func evictedForImageCache(msg string, evicted int) string {
	switch evicted {
	case 0:
		return msg
	case 1:
		return msg + "; 1 pod was evicted for exceeding the " + render.VolumeImageCache + " emptyDir limit"
	}
	return fmt.Sprintf("%s; %d pods were evicted for exceeding the %s emptyDir limit", msg, evicted, render.VolumeImageCache)
}

// imageCacheEvictionSeen lets through a pod that is an image-cache
// eviction when the cache first sees it (a restarted manager counts what
// it missed) or when it becomes one; the rest of the pods' churn does not
// change what the Deployment step reports.
var imageCacheEvictionSeen = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		pod, ok := e.Object.(*corev1.Pod)
		return ok && imageCacheEvicted(pod)
	},
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*corev1.Pod)
		cur, curOK := e.ObjectNew.(*corev1.Pod)
		return oldOK && curOK && !imageCacheEvicted(old) && imageCacheEvicted(cur)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
