package stories

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/realnode"
)

// roundTrip is what `netprobe glance` reports.
type roundTrip struct {
	ID               string `json:"id"`
	SHA256           string `json:"sha256"`
	Size             int64  `json:"size"`
	Listed           bool   `json:"listed"`
	DownloadedSHA256 string `json:"downloadedSHA256"`
	DownloadedSize   int64  `json:"downloadedSize"`
}

// uploadFromPod runs a client pod that uploads an image through api, lists
// it and downloads it; it returns what the client saw.
func (s *scene) uploadFromPod(t *testing.T, name, api string) roundTrip {
	t.Helper()
	return s.clientPod(t, name, "-api", api)
}

// clientPod runs `netprobe glance` with args as the demo user, and returns
// what it reports; the client failing fails the test.
func (s *scene) clientPod(t *testing.T, name string, args ...string) roundTrip {
	t.Helper()
	phase, log := env.RunPod(t, s.Namespace, s.client(name, args...))
	var rt roundTrip
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, "result "); ok {
			if err := json.Unmarshal([]byte(rest), &rt); err != nil {
				t.Fatalf("client %s: %v in %q", name, err, line)
			}
		}
	}
	if phase != corev1.PodSucceeded || rt.ID == "" {
		t.Fatalf("client %s %v: pod %s; log:\n%s", name, args, phase, log)
	}
	return rt
}

// firstUpload reports the first upload served since the chart's install.
var firstUpload sync.Once

// client is a pod running `netprobe glance` with args as the demo user.
func (s *scene) client(name string, args ...string) *corev1.Pod {
	return env.ProbePod(name, append([]string{"glance", "-keystone", s.KeystoneURL(), "-password", realnode.DemoPassword}, args...)...)
}

// keystoneRoles: Keystone's catalog names the Glance's endpoint as the
// image service and the Keystone Service as the identity service; the demo
// project's reader may list images but not create one: Glance enforces its
// policy on the roles Keystone's token carries.
func (s *scene) keystoneRoles(t *testing.T) {
	token, err := s.KeystoneToken(t.Context(), realnode.DemoUser, realnode.DemoPassword, realnode.DemoProject)
	if err != nil {
		t.Fatal(err)
	}
	for _, iface := range []string{"public", "internal"} {
		if got := token.Endpoint("image", iface); got != s.glance.Status.Endpoint {
			t.Errorf("the catalog's %s image endpoint: %q, want the Glance's status.endpoint %q", iface, got, s.glance.Status.Endpoint)
		}
		if got := token.Endpoint("identity", iface); got != s.KeystoneURL() {
			t.Errorf("the catalog's %s identity endpoint: %q, want %q", iface, got, s.KeystoneURL())
		}
	}
	phase, log := env.RunPod(t, s.Namespace, env.ProbePod("reader", "glance", "-api", s.APIURL(), "-keystone", s.KeystoneURL(),
		"-user", realnode.DemoReader, "-password", realnode.DemoPassword))
	if phase != corev1.PodFailed || !strings.Contains(log, "create image: HTTP 403") {
		t.Errorf("the reader %s uploading: pod %s, want it refused with 403 when it creates the image; log:\n%s", realnode.DemoReader, phase, log)
	}
}

// serve: a client pod uploads an image through the Glance Service (by its
// ClusterIP, then by its DNS name), lists it and downloads it with a
// matching checksum, and the object is in the S3 bucket; an image above
// the backend's largeObjectSize goes up in parts. The reference's
// basic-deployment step ends the story: a pod gets 200 from /healthcheck.
// Between them, Keystone's catalog and roles (keystoneRoles).
func (s *scene) serve(t *testing.T) {
	svc, err := env.CS.CoreV1().Services(s.Namespace).Get(t.Context(), realnode.GlanceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byIP := fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, v1alpha1.APIPort)
	for _, via := range []struct{ name, api string }{{"by-clusterip", byIP}, {"by-dns-name", s.APIURL()}} {
		t.Run(via.name, func(t *testing.T) {
			start := time.Now()
			rt := s.uploadFromPod(t, via.name, via.api)
			if !rt.Listed || rt.DownloadedSHA256 != rt.SHA256 || rt.DownloadedSize != rt.Size {
				t.Errorf("round trip through %s: %+v", via.api, rt)
			}
			obj, ok := s.object(t, rt.ID)
			if !ok || obj.SHA256 != rt.SHA256 || obj.Size != rt.Size {
				t.Errorf("S3 object %s/%s: present %v, %+v; want sha256 %s, %d bytes", realnode.Bucket, rt.ID, ok, obj, rt.SHA256, rt.Size)
			}
			t.Logf("%s: client pod uploaded, listed and downloaded %d bytes in %s", via.name, rt.Size, time.Since(start).Round(100*time.Millisecond))
			firstUpload.Do(func() {
				t.Logf("first upload served %s after helm install of the release the upgrade starts from began (both Deployments available after %s)",
					time.Since(installStarted).Round(100*time.Millisecond), installed.Round(100*time.Millisecond))
			})
		})
	}
	t.Run("multipart", s.multipart)
	t.Run("keystone", s.keystoneRoles)
	t.Run("healthcheck", func(t *testing.T) {
		phase, log := env.RunPod(t, s.Namespace, env.ProbePod("healthcheck", "http", "-url", s.APIURL()+"/healthcheck"))
		if phase != corev1.PodSucceeded || !strings.Contains(log, "status 200") {
			t.Errorf("GET %s/healthcheck from a pod: %s; log:\n%s", s.APIURL(), phase, log)
		}
	})
}

// multipartImageSize is above the scene backend's largeObjectSize, and
// three of its parts.
const multipartImageSize = 2*realnode.MultipartThresholdMiB<<20 + 2<<20

// multipart: an image of a known size above the backend's largeObjectSize
// goes to the S3 server as a multipart upload of largeObjectChunkSize
// parts (the server's ETag of the object ends in "-3"), and downloads with
// the same sha256.
func (s *scene) multipart(t *testing.T) {
	start := time.Now()
	rt := s.clientPod(t, "multipart", "-api", s.APIURL(), "-size", strconv.Itoa(multipartImageSize), "-sized")
	if rt.DownloadedSHA256 != rt.SHA256 || rt.DownloadedSize != multipartImageSize {
		t.Errorf("download of the multipart image: %+v", rt)
	}
	obj, ok := s.object(t, rt.ID)
	if !ok || obj.SHA256 != rt.SHA256 || obj.Size != multipartImageSize {
		t.Fatalf("S3 object %s/%s: present %v, %+v; want sha256 %s, %d bytes", realnode.Bucket, rt.ID, ok, obj, rt.SHA256, multipartImageSize)
	}
	if obj.Parts() != 3 {
		t.Errorf("S3 object %s/%s has ETag %s: written in %d parts, want 3 (largeObjectSize %d MiB)", realnode.Bucket, rt.ID, obj.ETag, obj.Parts(), realnode.MultipartThresholdMiB)
	}
	t.Logf("a %d-byte image went up in %d parts (ETag %s) and came back in %s", multipartImageSize, obj.Parts(), obj.ETag, time.Since(start).Round(100*time.Millisecond))
}
