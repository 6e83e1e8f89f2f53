package glance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/render"
)

// kubeletEmptyDirMessage is what the kubelet writes on a pod it evicted
// for an emptyDir over its sizeLimit.
func kubeletEmptyDirMessage(volume, limit string) string {
	return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", volume, limit)
}

// apiPod is an API pod of the Glance glance, created created seconds after
// an epoch, with the status given.
func apiPod(name string, created int, phase corev1.PodPhase, reason, message string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "openstack", Name: name, UID: types.UID(name + "-uid"),
			Labels:            render.APIPodLabels("glance"),
			CreationTimestamp: metav1.Time{Time: time.Unix(1_800_000_000+int64(created), 0)},
		},
		Status: corev1.PodStatus{Phase: phase, Reason: reason, Message: message},
	}
}

func evictedPod(name string, created int) *corev1.Pod {
	return apiPod(name, created, corev1.PodFailed, "Evicted", kubeletEmptyDirMessage(render.VolumeImageCache, "10Gi"))
}

// Only the kubelet's eviction for the image-cache volume counts: not one
// for another volume, for node pressure, or a pod failing otherwise. The
// limit is read from the message, and only when it is a quantity.
func TestImageCacheEvicted(t *testing.T) {
	for _, tt := range []struct {
		name  string
		pod   *corev1.Pod
		want  bool
		limit string
	}{
		{"image-cache over its limit", evictedPod("p", 0), true, "10Gi"},
		{"another emptyDir", apiPod("p", 0, corev1.PodFailed, "Evicted", kubeletEmptyDirMessage(render.VolumeStaging, "5Gi")), false, ""},
		{"node pressure", apiPod("p", 0, corev1.PodFailed, "Evicted", "The node was low on resource: ephemeral-storage. "), false, ""},
		{"failed, not evicted", apiPod("p", 0, corev1.PodFailed, "", kubeletEmptyDirMessage(render.VolumeImageCache, "10Gi")), false, "10Gi"},
		{"running", apiPod("p", 0, corev1.PodRunning, "", ""), false, ""},
		{"a limit that is no quantity", apiPod("p", 0, corev1.PodFailed, "Evicted", kubeletEmptyDirMessage(render.VolumeImageCache, "lots")), true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := imageCacheEvicted(tt.pod); got != tt.want {
				t.Errorf("imageCacheEvicted = %v, want %v", got, tt.want)
			}
			limit, ok := imageCacheEvictionLimit(tt.pod)
			if limit != tt.limit || ok != (tt.limit != "") {
				t.Errorf("limit %q (%v), want %q", limit, ok, tt.limit)
			}
		})
	}
}

// Each evicted pod is fresh once; a recorded pod that is gone is dropped;
// the recorded order stays, so a pass seeing nothing new changes no
// status; past the bound a pod waits, uncounted, for room.
func TestImageCacheEvictions(t *testing.T) {
	pods := func(ps ...*corev1.Pod) []corev1.Pod {
		out := make([]corev1.Pod, len(ps))
		for i, p := range ps {
			out[i] = *p
		}
		return out
	}
	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	running := apiPod("running", 0, corev1.PodRunning, "", "")
	a, b, c := evictedPod("a", 1), evictedPod("b", 2), evictedPod("c", 3)

	evicted, fresh, record := imageCacheEvictions(pods(running, b, a), nil)
	if got := names(fresh); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("fresh %v, want a and b, oldest first", got)
	}
	if want := []types.UID{"a-uid", "b-uid"}; !slices.Equal(record, want) {
		t.Errorf("record %v, want %v", record, want)
	}
	if len(evicted) != 2 {
		t.Errorf("evicted %v, want a and b, not the running pod", names(evicted))
	}

	// Seen again, in another order: nothing fresh, the record unchanged.
	_, fresh, again := imageCacheEvictions(pods(b, running, a), record)
	if len(fresh) != 0 || !slices.Equal(again, record) {
		t.Errorf("second pass: fresh %v, record %v; want none and %v", names(fresh), again, record)
	}

	// a is gone, c is new: a is dropped, c counted.
	_, fresh, record = imageCacheEvictions(pods(running, c, b), record)
	if got := names(fresh); !slices.Equal(got, []string{"c"}) {
		t.Errorf("fresh %v, want c", got)
	}
	if want := []types.UID{"b-uid", "c-uid"}; !slices.Equal(record, want) {
		t.Errorf("record %v, want %v", record, want)
	}

	// A full record: the next eviction waits until a recorded pod goes.
	var full []*corev1.Pod
	var counted []types.UID
	for i := range maxImageCacheEvictedPods {
		p := evictedPod(fmt.Sprintf("old-%03d", i), i)
		full = append(full, p)
		counted = append(counted, p.UID)
	}
	late := evictedPod("late", 10_000)
	_, fresh, record = imageCacheEvictions(pods(append(full, late)...), counted)
	if len(fresh) != 0 || len(record) != maxImageCacheEvictedPods || slices.Contains(record, late.UID) {
		t.Errorf("full record: fresh %v, %d recorded; want none and the %d already there", names(fresh), len(record), maxImageCacheEvictedPods)
	}
	_, fresh, record = imageCacheEvictions(pods(append(full[1:], late)...), record)
	if got := names(fresh); !slices.Equal(got, []string{"late"}) || len(record) != maxImageCacheEvictedPods {
		t.Errorf("room again: fresh %v, %d recorded; want late and %d", got, len(record), maxImageCacheEvictedPods)
	}
}

// The step lists the Glance's API pods, and announces and counts each
// image-cache eviction once, however many passes see it; another Glance's
// evicted pod is not its business.
func TestObserveImageCacheEvictionsOncePerPod(t *testing.T) {
	other := evictedPod("other-0", 0)
	other.Labels = render.APIPodLabels("other")
	s := newApplyScene(t, "", evictedPod("glance-api-1", 1), apiPod("glance-api-2", 2, corev1.PodRunning, "", ""), other)
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	s.p.r = &Reconciler{Recorder: recorder, Metrics: m}
	count := func() float64 {
		return testutil.ToFloat64(m.ImageCacheEvictions.WithLabelValues("glance", "openstack"))
	}

	for pass := range 3 {
		evicted, err := observeImageCacheEvictions(context.Background(), s.p, s.g)
		if err != nil {
			t.Fatal(err)
		}
		if evicted != 1 {
			t.Errorf("pass %d: %d evicted, want 1", pass, evicted)
		}
		if got, want := s.g.Status.ImageCacheEvictedPods, []types.UID{"glance-api-1-uid"}; !slices.Equal(got, want) {
			t.Errorf("pass %d: recorded %v, want %v", pass, got, want)
		}
		if count() != 1 {
			t.Errorf("pass %d: counted %v, want 1", pass, count())
		}
		evs := drainEvents(recorder)
		switch {
		case pass == 0 && (len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+v1alpha1.EventImageCacheEvicted) ||
			!strings.Contains(evs[0], "glance-api-1") || !strings.Contains(evs[0], "10Gi")):
			t.Errorf("events %q, want one ImageCacheEvicted Warning naming glance-api-1 and 10Gi", evs)
		case pass > 0 && len(evs) != 0:
			t.Errorf("pass %d announced again: %q", pass, evs)
		}
	}

	// The evicted pod is deleted: its UID goes from the status, nothing
	// more is counted.
	if err := s.server.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-api-1"}}); err != nil {
		t.Fatal(err)
	}
	if evicted, err := observeImageCacheEvictions(context.Background(), s.p, s.g); err != nil || evicted != 0 {
		t.Fatalf("after the delete: %d evicted, %v", evicted, err)
	}
	if len(s.g.Status.ImageCacheEvictedPods) != 0 || count() != 1 || len(drainEvents(recorder)) != 0 {
		t.Errorf("after the delete: recorded %v, counted %v; want none kept and still 1", s.g.Status.ImageCacheEvictedPods, count())
	}
}

// DeploymentReady's message while replicas are missing says how many pods
// the image cache had evicted.
func TestEvictedForImageCache(t *testing.T) {
	for evicted, want := range map[int]string{
		0: "1/2 replicas ready, 1 available",
		1: "1/2 replicas ready, 1 available; 1 pod was evicted for exceeding the image-cache emptyDir limit",
		3: "1/2 replicas ready, 1 available; 3 pods were evicted for exceeding the image-cache emptyDir limit",
	} {
		if got := evictedForImageCache("1/2 replicas ready, 1 available", evicted); got != want {
			t.Errorf("%d evicted: %q, want %q", evicted, got, want)
		}
	}
}

// Only a pod becoming an image-cache eviction, or first seen as one, wakes
// a pass.
func TestImageCacheEvictionSeen(t *testing.T) {
	running := apiPod("p", 0, corev1.PodRunning, "", "")
	evicted := evictedPod("p", 0)
	pressure := apiPod("p", 0, corev1.PodFailed, "Evicted", "The node was low on resource: memory. ")
	for _, tt := range []struct {
		name string
		got  bool
		want bool
	}{
		{"created evicted", imageCacheEvictionSeen.Create(event.CreateEvent{Object: evicted}), true},
		{"created running", imageCacheEvictionSeen.Create(event.CreateEvent{Object: running}), false},
		{"running to evicted", imageCacheEvictionSeen.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: evicted}), true},
		{"evicted, touched", imageCacheEvictionSeen.Update(event.UpdateEvent{ObjectOld: evicted, ObjectNew: evicted}), false},
		{"evicted for node pressure", imageCacheEvictionSeen.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: pressure}), false},
		{"deleted", imageCacheEvictionSeen.Delete(event.DeleteEvent{Object: evicted}), false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
