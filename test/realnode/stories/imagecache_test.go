package stories

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/realnode"
)

// The image cache story's sizes: an 8Mi emptyDir, pruned at 80% of it
// (6.4Mi), filled with 1.5MiB images, and one image larger than the
// emptyDir.
const (
	cacheSize      = "8Mi"
	cacheImageSize = 3 << 19 // 1.5 MiB
	hugeImageSize  = 12 << 20
)

// withImageCache gives a Glance one replica and an image cache of
// cacheSize.
func withImageCache(g *v1alpha1.Glance) {
	g.Spec.Deployment.Replicas = ptr.To[int32](1)
	g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse(cacheSize)}
}

// imageCache: on a Glance withImageCache whose cache is empty, a second
// download of an image is served from the cache (its file is in the cache
// directory on the node, and the store is read once); the sidecar's pruner
// brings a cache over image_cache_max_size back under it; a cache driven
// past its emptyDir bound gets the pod evicted by the kubelet, and the
// operator emits ImageCacheEvicted once.
func (s *scene) imageCache(t *testing.T) {
	pod := s.onlyPod(t)
	cacheDir := env.EmptyDirPath(pod.UID, render.VolumeImageCache)

	// The round trip's download fills the cache; the second is served
	// from it.
	first := s.uploadFromPodSized(t, "first", cacheImageSize)
	cached := filepath.Join(cacheDir, first.ID)
	if err := waitFile(t, cached); err != nil {
		t.Fatalf("after a download, the image is not in the cache directory: %v", err)
	}
	s.downloadFromPod(t, "second", first)
	if n := s.objectReads(t, first.ID); n != 1 {
		t.Errorf("after two downloads the S3 server logged %d GETs of the image, want 1 (the second from the cache)", n)
	}

	// Over image_cache_max_size (and under the emptyDir's bound), the
	// sidecar prunes: with the first, the cache receives 5 images of
	// 1.5MiB, 7.5MiB.
	maxSize := render.ImageCacheMaxSize(resource.MustParse(cacheSize))
	for i := range int(maxSize / cacheImageSize) {
		s.uploadFromPodSized(t, "fill-"+strconv.Itoa(i), cacheImageSize)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		return dirSize(t, cacheDir) <= maxSize, nil
	}); err != nil {
		t.Errorf("the cache stayed over image_cache_max_size %d: %d bytes", maxSize, dirSize(t, cacheDir))
	}
	if log := s.containerLog(t, pod.Name, render.ContainerCacheMaintenance); !strings.Contains(log, "running glance-cache-pruner") {
		t.Errorf("the sidecar's log shows no pruner run:\n%s", log)
	}

	// Past the emptyDir's bound, the kubelet evicts the pod: downloads of
	// an image larger than the bound refill the cache faster than the
	// sidecar, which looks every 30s, prunes it. They go to the pod's own
	// address, not the Service: a download whose client pod starts late
	// must not fill the replacement's cache too.
	huge := s.uploadFromPodSized(t, "huge-upload", hugeImageSize)
	evicted := s.downloadUntilEvicted(t, huge, pod)
	t.Logf("kubelet: %s", evicted.Status.Message)
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(s.events(t, v1alpha1.EventImageCacheEvicted)) > 0, nil
	}); err != nil {
		t.Fatalf("no %s event after the kubelet evicted %s", v1alpha1.EventImageCacheEvicted, pod.Name)
	}
	// Once: the next passes of the operator do not repeat it.
	s.waitReady(t, 0)
	time.Sleep(15 * time.Second)
	if evs := s.events(t, v1alpha1.EventImageCacheEvicted); len(evs) != 1 || evs[0].Count > 1 || !strings.Contains(evs[0].Message, pod.Name) {
		t.Errorf("want one %s event naming %s, got %d: %+v", v1alpha1.EventImageCacheEvicted, pod.Name, len(evs), evs)
	}
}

// onlyPod is the Glance's one running pod.
func (s *scene) onlyPod(t *testing.T) corev1.Pod {
	t.Helper()
	pods := env.RunningPods(t, s.Namespace, realnode.GlanceName)
	if len(pods) != 1 {
		t.Fatalf("want one Glance pod, have %d", len(pods))
	}
	return pods[0]
}

// uploadFromPodSized is uploadFromPod with an image of size bytes.
func (s *scene) uploadFromPodSized(t *testing.T, name string, size int) roundTrip {
	t.Helper()
	return s.clientPod(t, name, "-api", s.APIURL(), "-size", strconv.Itoa(size))
}

// downloadFromPod downloads an image from a pod and compares its sha256.
func (s *scene) downloadFromPod(t *testing.T, name string, img roundTrip) roundTrip {
	t.Helper()
	return s.clientPod(t, name, "-api", s.APIURL(), "-image", img.ID, "-sha256", img.SHA256)
}

// tryDownloadFromPod downloads an image from a pod through api, which may
// fail.
func (s *scene) tryDownloadFromPod(t *testing.T, name, api string, img roundTrip) (corev1.PodPhase, string) {
	t.Helper()
	return env.RunPod(t, s.Namespace, s.client(name, "-api", api, "-image", img.ID, "-sha256", img.SHA256))
}

// downloadUntilEvicted downloads img from pods, one after another, from
// the Glance pod glance itself until the kubelet has evicted it.
func (s *scene) downloadUntilEvicted(t *testing.T, img roundTrip, glance corev1.Pod) *corev1.Pod {
	t.Helper()
	name := glance.Name
	api := "http://" + net.JoinHostPort(glance.Status.PodIP, strconv.Itoa(v1alpha1.APIPort))
	var pod *corev1.Pod
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; ; i++ {
		var err error
		if pod, err = env.CS.CoreV1().Pods(s.Namespace).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == "Evicted" {
			return pod
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not evicted after %d downloads of %d bytes (phase %s, reason %q)%s", name, i, hugeImageSize,
				pod.Status.Phase, pod.Status.Reason, env.PodEvents(context.Background(), s.Namespace, name))
		}
		_, _ = s.tryDownloadFromPod(t, "huge-download-"+strconv.Itoa(i), api, img)
	}
}

// events are the Glance's events of reason.
func (s *scene) events(t *testing.T, reason string) []corev1.Event {
	t.Helper()
	list, err := env.CS.CoreV1().Events(s.Namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Glance,reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// containerLog is the log of one container of a pod.
func (s *scene) containerLog(t *testing.T, pod, container string) string {
	t.Helper()
	b, err := env.CS.CoreV1().Pods(s.Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("logs of %s/%s %s: %v", s.Namespace, pod, container, err)
	}
	return string(b)
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) error {
	return wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
}

// dirSize is the bytes of the regular files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("size of the cache directory: %w", err))
	}
	return n
}
