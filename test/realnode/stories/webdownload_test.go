package stories

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/glanceclient"
	"github.com/c5c3/glance-operator/test/realnode"
)

// The web server the web-download story imports from: a pod and Service
// of this name, on this port.
const (
	webServerName = "web"
	webServerPort = 8080
)

// webServerHost is the web server's name as an image URL gives it: fully
// qualified, since Glance resolves hosts as absolute names.
func webServerHost(ns string) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local", webServerName, ns)
}

// withWebDownload states the web-download policy of the NetworkPolicy
// scene: the web server by name, on its port, in the pod range (a policy
// judges the pod's address, after the Service's translation).
func withWebDownload(g *v1alpha1.Glance) {
	g.Spec.WebDownload = &v1alpha1.WebDownloadSpec{
		Hosts: []string{webServerHost(g.Namespace)},
		CIDRs: []string{controlplane.PodCIDR},
		Ports: []int32{webServerPort},
	}
}

// webDownload: with the Glance's NetworkPolicy in force, an image imported
// with web-download from the host the policy names is active with what
// the server serves; URLs outside the policy, by the server's pod address
// or on another port, are refused at once with Glance's filter error
// instead of a fetch that times out.
func (s *scene) webDownload(t *testing.T) {
	server, svc, err := env.ServePod(t.Context(), s.Namespace, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: webServerName},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "web",
				Image:           env.Netprobe,
				Args:            []string{"serve", "-addr", ":" + strconv.Itoa(webServerPort)},
				Ports:           []corev1.ContainerPort{{ContainerPort: webServerPort}},
				SecurityContext: realnode.Restricted(),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(webServerPort)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}, corev1.ServicePort{Port: webServerPort, TargetPort: intstr.FromInt32(webServerPort)})
	if err != nil {
		t.Fatal(err)
	}
	// What the server serves, read by this process through the Service
	// once kube-proxy has its endpoint (until then it refuses).
	want := fetchSHA256(t, "http://"+net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(webServerPort))+"/")

	pod := s.glancePods(t, realnode.DemoUser, realnode.DemoPassword)[0]
	t.Run("allowed", func(t *testing.T) {
		uri := fmt.Sprintf("http://%s:%d/", webServerHost(s.Namespace), webServerPort)
		img := s.webDownloadImport(t, pod, "web-download-allowed", uri)
		if r, err := pod.StartImport(img.ID, webDownloadBody(uri)); err != nil || r.Code != http.StatusAccepted {
			t.Fatalf("import of %s by web-download: %v %v", uri, r, err)
		}
		img = waitImport(t, pod.Client, img.ID, func(img glanceclient.Image) bool { return img.Status == "active" })
		if img.Status != "active" || img.FailedImport != "" {
			t.Fatalf("image %s imported from %s: %+v, want active (the NetworkPolicy's egress must admit the fetch)", img.ID, uri, img)
		}
		got, n, err := pod.Download(img.ID)
		if err != nil || got != want.sha256 || n != want.size {
			t.Errorf("image %s downloads as %d bytes with sha256 %s (%v); the server serves %d bytes with %s", img.ID, n, got, err, want.size, want.sha256)
		}
	})
	for _, refused := range []struct{ name, uri string }{
		{"by-address", fmt.Sprintf("http://%s:%d/", server.Status.PodIP, webServerPort)},
		{"other-port", fmt.Sprintf("http://%s:%d/", webServerHost(s.Namespace), webServerPort+1)},
	} {
		t.Run(refused.name, func(t *testing.T) {
			img := s.webDownloadImport(t, pod, "web-download-"+refused.name, refused.uri)
			start := time.Now()
			r, err := pod.StartImport(img.ID, webDownloadBody(refused.uri))
			if err != nil || r.Code != http.StatusBadRequest || !strings.Contains(string(r.Body), "does not pass filtering") {
				t.Fatalf("import of %s, outside the policy: %v %v; want 400 with Glance's filter error", refused.uri, r, err)
			}
			t.Logf("%s refused in %s", refused.uri, time.Since(start).Round(time.Millisecond))
			if img, _, err := pod.Image(img.ID); err != nil || img.Status != "queued" {
				t.Errorf("image %s after the refused import: %+v %v, want it queued", img.ID, img, err)
			}
		})
	}
}

// webDownloadImport creates an image named name for an import from uri.
func (s *scene) webDownloadImport(t *testing.T, pod glancePod, name, uri string) glanceclient.Image {
	t.Helper()
	img, r, err := pod.CreateImage(name)
	if err != nil {
		t.Fatalf("create image %s (for %s): %v %v", name, uri, r, err)
	}
	return img
}

// webDownloadBody is the body of a web-download import of uri.
func webDownloadBody(uri string) glanceclient.Import {
	return glanceclient.Import{Method: glanceclient.ImportMethod{Name: "web-download", URI: uri}}
}

// served is what a URL serves: its sha256 and size.
type served struct {
	sha256 string
	size   int64
}

// fetchSHA256 GETs url, trying again for half a minute while the
// connection is refused.
func fetchSHA256(t *testing.T, url string) served {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	resp, err := importHTTP.Get(url)
	for err != nil && errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		resp, err = importHTTP.Get(url)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return served{hex.EncodeToString(h.Sum(nil)), n}
}
