package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// countingReader counts the Lists it serves, or fails them with err.
type countingReader struct {
	client.Reader
	lists int
	err   error
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.lists++
	if r.err != nil {
		return r.err
	}
	return r.Reader.List(ctx, list, opts...)
}

func backendsReader(t *testing.T, backends ...*v1alpha1.GlanceBackend) *countingReader {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&v1alpha1.GlanceBackend{}, v1alpha1.IndexBackendGlance, v1alpha1.BackendGlanceIndex)
	for _, o := range backends {
		b = b.WithObjects(o)
	}
	return &countingReader{Reader: b.Build()}
}

// TestCachedLookupsRefuseFromTheCacheOnly: the watch may answer only when
// it shows another live default; every other answer is the API server's.
func TestCachedLookupsRefuseFromTheCacheOnly(t *testing.T) {
	const ns = "openstack"
	deleting := sampleBackend(ns, "leaving", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"glance.openstack.c5c3.io/backend"}
	for name, c := range map[string]struct {
		cached   []*v1alpha1.GlanceBackend
		cacheErr error
		wantAPI  bool
	}{
		"another default is cached":        {cached: []*v1alpha1.GlanceBackend{sampleBackend(ns, "primary", true), sampleBackend(ns, "archive", false)}},
		"no default is cached":             {cached: []*v1alpha1.GlanceBackend{sampleBackend(ns, "archive", false)}, wantAPI: true},
		"only the reviewed one is default": {cached: []*v1alpha1.GlanceBackend{sampleBackend(ns, "archive", true)}, wantAPI: true},
		"the cached default is leaving":    {cached: []*v1alpha1.GlanceBackend{deleting}, wantAPI: true},
		"the cache fails":                  {cacheErr: errors.New("cache not started"), wantAPI: true},
	} {
		t.Run(name, func(t *testing.T) {
			cache := backendsReader(t, c.cached...)
			cache.err = c.cacheErr
			// The API server knows a default the watch has not delivered.
			api := backendsReader(t, sampleBackend(ns, "primary", true), sampleBackend(ns, "new-default", true))
			l := CachedLookups{APILookups: APILookups{Reader: api}, Cache: cache}
			got, err := l.Backends(t.Context(), ns, "glance", "archive")
			if err != nil {
				t.Fatal(err)
			}
			if cache.lists != 1 {
				t.Errorf("%d cache lists, want 1", cache.lists)
			}
			if asked := api.lists == 1; asked != c.wantAPI {
				t.Fatalf("API server asked: %v, want %v", asked, c.wantAPI)
			}
			if c.wantAPI && len(got) != 2 {
				t.Errorf("answer %d backends, want the API server's 2", len(got))
			}
		})
	}
}
