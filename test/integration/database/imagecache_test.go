package database

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// A Glance pod the kubelet evicted because its image-cache emptyDir
// exceeded its limit is announced and counted once, however many passes
// see it; DeploymentReady says so while the replica is missing; the
// record of it goes with the pod. There is no kubelet: the test writes the
// pod's status as the kubelet would.
func TestImageCacheEvictionCountedOnce(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install(func(g *v1alpha1.Glance) {
		g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("10Gi")}
	})
	ctx := context.Background()
	evictions := s.Manager.Metrics.ImageCacheEvictions.WithLabelValues("glance", s.NS)

	// The ServiceAccount admission wants the pod's ServiceAccount to
	// exist; there is no controller manager to create it.
	if err := cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: "glance-api-evicted", Labels: render.APIPodLabels("glance")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "glance-api", Image: "glance"}}},
	}
	s.Create(pod)
	// A running pod of the Glance wakes nothing and counts nothing.
	time.Sleep(time.Second)
	if got := testutil.ToFloat64(evictions); got != 0 {
		t.Fatalf("a running pod counted: %v", got)
	}

	// The kubelet evicts it; the Deployment controller sees a replica
	// missing.
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodFailed, Reason: "Evicted",
		Message: fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", render.VolumeImageCache, "10Gi"),
	}
	if err := cl.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	d := s.Deployment(nil)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 0, AvailableReplicas: 0,
	}
	if err := cl.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	s.ConditionSaying(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment,
		"1 pod was evicted for exceeding the image-cache emptyDir limit")
	s.events(v1alpha1.EventImageCacheEvicted)
	s.Eventually("glance_operator_image_cache_evictions_total = 1", func() bool {
		return testutil.ToFloat64(evictions) == 1
	}, func() string { return fmt.Sprint(testutil.ToFloat64(evictions)) })

	// More passes, the replica back, a restarted manager: still once.
	for range 3 {
		reconcileTrace.NextPasses(t, cl, "glance", s.ReadGlance())
	}
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	s.Stop()
	s.Start()
	evictions = s.Manager.Metrics.ImageCacheEvictions.WithLabelValues("glance", s.NS)
	for range 3 {
		reconcileTrace.NextPasses(t, cl, "glance", s.ReadGlance())
	}
	time.Sleep(eventDelivery)
	s.eventsOnce(v1alpha1.EventImageCacheEvicted)
	if got := testutil.ToFloat64(evictions); got != 0 {
		t.Errorf("the restarted manager counted the eviction again: %v", got)
	}
	if g := s.ReadGlance(); !slices.Equal(g.Status.ImageCacheEvictedPods, []types.UID{pod.UID}) {
		t.Errorf("status.imageCacheEvictedPods %v, want the evicted pod %s", g.Status.ImageCacheEvictedPods, pod.UID)
	}
	if note := evictionNote(t, s.NS); !strings.Contains(note, pod.Name) || !strings.Contains(note, "10Gi") {
		t.Errorf("the ImageCacheEvicted note %q names neither the pod nor the limit", note)
	}

	// The pod goes: so does its record.
	if err := cl.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	s.Eventually("status.imageCacheEvictedPods emptied", func() bool {
		reconcileTrace.NextPasses(t, cl, "glance", s.ReadGlance())
		return len(s.ReadGlance().Status.ImageCacheEvictedPods) == 0
	}, func() string { return fmt.Sprint(s.ReadGlance().Status.ImageCacheEvictedPods) })
}

// evictionNote is the note of the ImageCacheEvicted event regarding the
// Glance in namespace.
func evictionNote(t *testing.T, namespace string) string {
	t.Helper()
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Glance" && e.Reason == v1alpha1.EventImageCacheEvicted {
			return e.Note
		}
	}
	return ""
}
