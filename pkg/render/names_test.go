package render

import (
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestContentHash(t *testing.T) {
	a := map[string]string{"glance-api.conf": "x", "glance-api-paste.ini": "y"}
	h := ContentHash(a)
	if !regexp.MustCompile(`^[0-9a-f]{10}$`).MatchString(h) {
		t.Fatalf("hash %q is not 10 hex characters", h)
	}
	// Map iteration order must not matter.
	for i := 0; i < 20; i++ {
		if ContentHash(map[string]string{"glance-api-paste.ini": "y", "glance-api.conf": "x"}) != h {
			t.Fatal("hash depends on map order")
		}
	}
	distinct := []map[string]string{
		a,
		{"glance-api.conf": "x", "glance-api-paste.ini": "z"},
		{"glance-api.conf": "x"},
		{"ab": "c"},
		{"a": "bc"},
		{"a": "", "b": ""},
		{},
	}
	seen := map[string]int{}
	for i, d := range distinct {
		if j, dup := seen[ContentHash(d)]; dup {
			t.Errorf("data %d and %d hash alike", j, i)
		}
		seen[ContentHash(d)] = i
	}
}

func TestObjectNames(t *testing.T) {
	data := map[string]string{"k": "v"}
	h := ContentHash(data)
	if got := ConfigMapName("glance", data); got != "glance-config-"+h {
		t.Errorf("ConfigMapName = %q", got)
	}
	if got := BackendsSecretName("glance", data); got != "glance-backends-"+h {
		t.Errorf("BackendsSecretName = %q", got)
	}
	if got := DBConnectionSecretName("glance"); got != "glance-db-connection" {
		t.Errorf("DBConnectionSecretName = %q", got)
	}
}

func TestImageCacheMaxSize(t *testing.T) {
	tests := []struct {
		size string
		want int64
	}{
		{"10Gi", 8589934592},
		{"50Gi", 42949672960},
		{"1G", 800000000},
		{"999", 799},
		{"1", 0},
		{"0", 0},
		{"7Ei", 6456360425798343065}, // 7*2^60 * 0.8, rounded down, without overflow
	}
	for _, tt := range tests {
		if got := ImageCacheMaxSize(resource.MustParse(tt.size)); got != tt.want {
			t.Errorf("ImageCacheMaxSize(%s) = %d, want %d", tt.size, got, tt.want)
		}
	}
}
