package realnode

import (
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/hack/release/publish"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// What make release prints is what the operator upgrade reads of the
// release it starts from.
func TestParseReleaseReadsWhatMakeReleasePrints(t *testing.T) {
	reg := "127.0.0.1:5000/" + PreviousRegistryNamespace
	want := publish.Release{
		Images: []publish.Image{
			{Name: "glance-operator", Reference: reg + "/glance-operator@sha256:" + strings.Repeat("a", 64), Tagged: reg + "/glance-operator:0.1.0",
				Platforms: []ociimage.Platform{{Arch: "amd64"}}},
			{Name: "glance-webhook", Reference: reg + "/glance-webhook@sha256:" + strings.Repeat("b", 64), Tagged: reg + "/glance-webhook:0.1.0"},
		},
		Chart: "oci://" + reg + "/charts/glance-operator", ChartVersion: "0.1.0",
		ChartDigest: "sha256:" + strings.Repeat("c", 64), ChartArchive: "/tmp/glance-operator-0.1.0.tgz",
	}
	got, err := parseRelease(want.String(), reg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Chart != want.Chart || got.ChartVersion != want.ChartVersion || ReleaseImages(got) != ReleaseImages(want) {
		t.Errorf("parsed %+v from:\n%s", got, want)
	}
	if _, err := parseRelease("oci://"+reg+"/charts/glance-operator --version 0.1.0\n", reg); err == nil {
		t.Error("a release without images parsed")
	}
}

// A ref the repository lacks (a shallow clone) fails, naming the ref,
// before anything is built.
func TestPublishPreviousReleaseNamesAMissingRef(t *testing.T) {
	const ref = "0123456789abcdef0123456789abcdef01234567"
	_, err := PublishPreviousRelease(t.Context(), &controlplane.Registry{}, ref, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "not in the history") {
		t.Errorf("got %v, want an error naming %s as not in the history", err, ref)
	}
	t.Log(err)
}
