package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/controlplane"
)

const (
	// imageCacheEvictionNamespace is the namespace of the eviction story.
	imageCacheEvictionNamespace = "e2e-image-cache-eviction"
	// evictAnnotation marks the one pod the story's kwok stage evicts: the
	// replacement the ReplicaSet creates carries only the template's
	// annotations, so it is left running.
	evictAnnotation = "e2e.glance.c5c3.io/evict"
	// imageCacheLimit is the story's spec.imageCache.size, the emptyDir's
	// sizeLimit the kubelet's message names.
	imageCacheLimit = "1Gi"
)

// imageCacheEvictionStage evicts, as the kubelet does an emptyDir over its
// sizeLimit, the running pods of the story's namespace that carry
// evictAnnotation.
var imageCacheEvictionStage = controlplane.EvictedPodStage("e2e-evict-image-cache",
	fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", render.VolumeImageCache, imageCacheLimit),
	fmt.Sprintf(`{key: .metadata.namespace, operator: In, values: [%q]}`, imageCacheEvictionNamespace),
	fmt.Sprintf(`{key: '.metadata.annotations["%s"]', operator: In, values: ["image-cache"]}`, evictAnnotation),
)

// A Glance pod the kubelet evicts because its image-cache emptyDir went
// over its limit is announced with one ImageCacheEvicted Warning naming
// the pod and the limit, and counted once in
// glance_operator_image_cache_evictions_total, however many passes see it
// afterwards; the replacement pod brings the Glance back to Ready.
func TestImageCacheEviction(t *testing.T) {
	t.Parallel()
	s := newScene(t, imageCacheEvictionNamespace)
	s.install(func(g *v1alpha1.Glance) {
		g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse(imageCacheLimit)}
	})
	evictions := func() float64 {
		return metricValue(t, "glance_operator_image_cache_evictions_total", map[string]string{"glance": "glance", "namespace": s.ns})
	}
	if got := evictions(); got != 0 {
		t.Fatalf("glance_operator_image_cache_evictions_total = %v before any eviction", got)
	}

	ctx := context.Background()
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(s.ns), client.MatchingLabels(render.APIPodLabels("glance"))); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil })
	if i < 0 {
		t.Fatalf("no running glance-api pod among %d", len(pods.Items))
	}
	victim := pods.Items[i]
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"image-cache"}}}`, evictAnnotation)
	if err := cl.Patch(ctx, &victim, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	s.eventually("kwok to evict "+victim.Name, func() (bool, string) {
		var p corev1.Pod
		if !s.get(victim.Name, &p) {
			return false, "gone"
		}
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted", fmt.Sprintf("%s/%s", p.Status.Phase, p.Status.Reason)
	})

	ev := s.event(corev1.EventTypeWarning, v1alpha1.EventImageCacheEvicted)
	if !strings.Contains(ev.Note, victim.Name) || !strings.Contains(ev.Note, imageCacheLimit) {
		t.Errorf("the %s event says %q, naming not both %s and %s", ev.Reason, ev.Note, victim.Name, imageCacheLimit)
	}
	s.eventually("the eviction counted", func() (bool, string) {
		n := evictions()
		return n == 1, fmt.Sprint(n)
	})
	// The replacement pod brings the Glance back.
	s.ready()

	// More passes see the same evicted pod: it stays announced and counted
	// once.
	for n := range 3 {
		s.update(func(g *v1alpha1.Glance) { g.Labels = map[string]string{"nudge": fmt.Sprint(n)} })
		time.Sleep(time.Second)
	}
	s.ready()
	time.Sleep(2 * time.Second)
	if got := evictions(); got != 1 {
		t.Errorf("glance_operator_image_cache_evictions_total = %v after more passes, want 1", got)
	}
	announced := 0
	for _, e := range s.glanceEvents() {
		if e.Reason != v1alpha1.EventImageCacheEvicted {
			continue
		}
		announced++
		if e.Series != nil {
			announced += int(e.Series.Count) - 1
		}
	}
	if announced != 1 {
		t.Errorf("%d %s events, want exactly one", announced, v1alpha1.EventImageCacheEvicted)
	}
	if g := s.glanceObj(); !slices.Equal(g.Status.ImageCacheEvictedPods, []types.UID{victim.UID}) {
		t.Errorf("status.imageCacheEvictedPods %v, want the evicted pod %s", g.Status.ImageCacheEvictedPods, victim.UID)
	}
}
