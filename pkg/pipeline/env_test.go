package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
)

// statusPatch is one status write seen by the interceptor, with the primary
// object's metadata at the moment of the write.
type statusPatch struct {
	subResource     string
	patchType       string
	body            map[string]any
	annotations     map[string]string
	resourceVersion string
}

// writes counts every API write made through a client and records the
// status patches.
type writes struct {
	mu      sync.Mutex
	total   int
	patches []statusPatch
	// failStatus, when set, is returned by every status write.
	failStatus error
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

func (w *writes) statusPatches() []statusPatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]statusPatch(nil), w.patches...)
}

func (w *writes) inc() {
	w.mu.Lock()
	w.total++
	w.mu.Unlock()
}

// funcs intercepts every write. Metadata patches of the main resource are
// counted too: a test that expects zero writes expects zero of any kind.
func (w *writes) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.inc()
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.inc()
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.inc()
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.inc()
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.inc()
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			var body map[string]any
			if err := json.Unmarshal(data, &body); err != nil {
				return fmt.Errorf("status patch is not a JSON object: %w", err)
			}
			w.mu.Lock()
			w.total++
			w.patches = append(w.patches, statusPatch{
				subResource:     sub,
				patchType:       string(patch.Type()),
				body:            body,
				annotations:     obj.GetAnnotations(),
				resourceVersion: obj.GetResourceVersion(),
			})
			fail := w.failStatus
			w.mu.Unlock()
			if fail != nil {
				return fail
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func newMetrics(t *testing.T) (*metrics.Reconcile, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m.Reconcile, reg
}

// histogramCount returns the number of observations of a histogram series,
// -1 when the series does not exist.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) int {
	t.Helper()
	m := findSeries(t, reg, name, labels)
	if m == nil {
		return -1
	}
	return int(m.GetHistogram().GetSampleCount())
}

// counterValue returns the value of a counter series, -1 when the series does
// not exist.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m := findSeries(t, reg, name, labels)
	if m == nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func findSeries(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m
		}
	}
	return nil
}

// logSink collects log lines for assertions.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) context(ctx context.Context) context.Context {
	return log.IntoContext(ctx, funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
	}, funcr.Options{}))
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
