package stories

import (
	"testing"
	"time"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/realnode"
)

// s3TLS: the backend moves to the S3 server's HTTPS port, whose
// certificate the scene's own CA signs, and names that CA in
// s3.caBundleSecretRef; the pods roll once, and an image uploaded through
// the Service lands in the bucket over TLS and downloads with the same
// sha256.
func (s *scene) s3TLS(t *testing.T) {
	before := s.deployment(t)
	start := time.Now()
	b := &v1alpha1.GlanceBackend{}
	if err := cl.Get(t.Context(), keyOf(s.Namespace, realnode.BackendName), b); err != nil {
		t.Fatal(err)
	}
	b.Spec.S3.Host = s.S3URL("https", realnode.S3TLSPort)
	b.Spec.S3.CABundleSecretRef = &v1alpha1.SecretKeySelector{Name: realnode.S3CASecretName}
	if err := cl.Update(t.Context(), b); err != nil {
		t.Fatalf("the backend to %s with the scene's CA: %v", b.Spec.S3.Host, err)
	}
	s.waitRollout(t, before.Generation)
	t.Logf("the backend moved to %s: pods rolled in %s", b.Spec.S3.Host, time.Since(start).Round(100*time.Millisecond))

	rt := s.uploadFromPod(t, "over-tls", s.APIURL())
	if !rt.Listed || rt.DownloadedSHA256 != rt.SHA256 || rt.DownloadedSize != rt.Size {
		t.Errorf("round trip through the HTTPS backend: %+v", rt)
	}
	if obj, ok := s.object(t, rt.ID); !ok || obj.SHA256 != rt.SHA256 || obj.Size != rt.Size {
		t.Errorf("S3 object %s/%s: present %v, %+v; want sha256 %s, %d bytes", realnode.Bucket, rt.ID, ok, obj, rt.SHA256, rt.Size)
	}
}
