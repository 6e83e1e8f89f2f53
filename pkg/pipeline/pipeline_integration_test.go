package pipeline_test

// The tests of this file run the pipeline against a real kube-apiserver with
// the Glance CRD installed. The server starts on first use, so the unit tests
// of the package do not need the control-plane binaries; these tests fail,
// naming `make control-plane`, when the binaries are absent.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
)

const integrationNamespace = "pipeline"

var apiServer struct {
	once sync.Once
	srv  *controlplane.APIServer
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if apiServer.srv != nil {
		if err := apiServer.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop kube-apiserver:", err)
		}
	}
	os.Exit(code)
}

// realEnv is a real API server and a client to it whose writes are counted.
type realEnv struct {
	// direct writes around the counted client, as another actor would.
	direct client.Client
	client client.Client
	writes *writes
}

func newRealEnv(t *testing.T) *realEnv {
	t.Helper()
	apiServer.once.Do(func() {
		apiServer.srv, apiServer.err = controlplane.StartAPIServer(controlplane.APIServerOptions{CRDs: controlplane.CRDs{Glance: true}})
		if apiServer.err != nil {
			return
		}
		var c client.Client
		if c, apiServer.err = client.New(apiServer.srv.Config, client.Options{}); apiServer.err != nil {
			return
		}
		apiServer.err = c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: integrationNamespace}})
	})
	if apiServer.err != nil {
		t.Fatalf("start kube-apiserver: %v", apiServer.err)
	}
	scheme := newScheme(t)
	direct, err := client.NewWithWatch(apiServer.srv.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w := &writes{}
	return &realEnv{direct: direct, client: interceptor.NewClient(direct, w.funcs()), writes: w}
}

// create stores the minimal Glance under name and returns it as stored.
func (e *realEnv) create(t *testing.T, name string) *v1alpha1.Glance {
	t.Helper()
	ctx := context.Background()
	if err := e.direct.Create(ctx, fixtures.Object(fixtures.MinimalGlance, integrationNamespace, name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.direct.Delete(context.Background(), &v1alpha1.Glance{ObjectMeta: metav1.ObjectMeta{Namespace: integrationNamespace, Name: name}})
	})
	return e.get(t, name)
}

func (e *realEnv) get(t *testing.T, name string) *v1alpha1.Glance {
	t.Helper()
	var g v1alpha1.Glance
	if err := e.direct.Get(context.Background(), client.ObjectKey{Namespace: integrationNamespace, Name: name}, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func (e *realEnv) pipeline(t *testing.T, stages ...stage) *pipeline.Pipeline[glance, pass] {
	t.Helper()
	m, _ := newMetrics(t)
	return &pipeline.Pipeline[glance, pass]{
		Stages:        stages,
		Aggregate:     ready,
		SubConditions: subConditions,
		Metrics:       m,
		Status:        e.client.Status(),
	}
}

func TestIntegrationStatusWriteTouchesOnlyStatus(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	g := e.create(t, "status-only")
	readRV := g.ResourceVersion

	// Another actor edits spec and metadata after the pass read the object,
	// so the pass holds a stale resourceVersion and a stale spec.
	edit := []byte(`{"metadata":{"labels":{"edited":"by-user"}},"spec":{"region":"RegionTwo"}}`)
	if err := e.direct.Patch(ctx, g.DeepCopy(), client.RawPatch("application/merge-patch+json", edit)); err != nil {
		t.Fatal(err)
	}
	// In-memory changes to spec and metadata must never be sent.
	g.Spec.Region = "NeverSent"
	g.Labels = map[string]string{"in-memory": "only"}

	p := e.pipeline(t, pipeline.Single(ok("A", condA)), pipeline.Single(requeue("B", condB, 10*time.Second)))
	res, err := p.Run(ctx, g, &trace{})
	if err != nil {
		t.Fatalf("Run over a stale object: %v", err)
	}
	if res.RequeueAfter != 10*time.Second {
		t.Errorf("Run result = %+v, want the step's 10s requeue", res)
	}

	patches := e.writes.statusPatches()
	if len(patches) != 1 || e.writes.count() != 1 {
		t.Fatalf("%d status writes, %d writes in all; want one status write", len(patches), e.writes.count())
	}
	if sp := patches[0]; sp.subResource != "status" || sp.patchType != "application/merge-patch+json" ||
		len(sp.body) != 1 || sp.body["status"] == nil {
		t.Fatalf("status write: %s patch of %q with body %v; want a merge patch of the status subresource with only status", sp.patchType, sp.subResource, sp.body)
	}
	if patches[0].resourceVersion != readRV {
		t.Errorf("the write was made with resourceVersion %s, want the stale %s it read", patches[0].resourceVersion, readRV)
	}

	stored := e.get(t, "status-only")
	if stored.Spec.Region != "RegionTwo" || stored.Labels["edited"] != "by-user" || stored.Labels["in-memory"] != "" {
		t.Errorf("stored region %q, labels %v: want the other actor's edit kept and nothing of the in-memory object", stored.Spec.Region, stored.Labels)
	}
	wantCondition(t, stored, condA, metav1.ConditionTrue, "Fine")
	wantCondition(t, stored, condB, metav1.ConditionFalse, "Polling")
	wantCondition(t, stored, ready, metav1.ConditionFalse, pipeline.ReasonNotAllReady)
	// The status describes the generation the pass saw, not the one the
	// other actor's edit produced.
	if stored.Generation != 2 || stored.Status.ObservedGeneration != 1 || condition(t, stored, condA).ObservedGeneration != 1 {
		t.Errorf("generation %d, observedGeneration %d (AReady %d); want 2, 1, 1",
			stored.Generation, stored.Status.ObservedGeneration, condition(t, stored, condA).ObservedGeneration)
	}
}

func TestIntegrationNoOpPassWritesNothing(t *testing.T) {
	e := newRealEnv(t)
	ctx := context.Background()
	g := e.create(t, "no-op")
	p := e.pipeline(t, pipeline.Single(ok("A", condA)), pipeline.Single(ok("B", condB)), pipeline.Parallel(ok("C", condC)))

	if _, err := p.Run(ctx, g, &trace{}); err != nil {
		t.Fatal(err)
	}
	if n := e.writes.count(); n != 1 {
		t.Fatalf("first pass: %d writes, want 1", n)
	}
	rv := e.get(t, "no-op").ResourceVersion

	// Again on the object the write returned, and on a fresh read.
	if _, err := p.Run(ctx, g, &trace{}); err != nil {
		t.Fatal(err)
	}
	fresh := e.get(t, "no-op")
	if _, err := p.Run(ctx, fresh, &trace{}); err != nil {
		t.Fatal(err)
	}
	if n := e.writes.count(); n != 1 {
		t.Errorf("%d writes after two no-op passes, want still 1", n)
	}
	stored := e.get(t, "no-op")
	if stored.ResourceVersion != rv {
		t.Errorf("resourceVersion moved from %s to %s in no-op passes", rv, stored.ResourceVersion)
	}
	wantCondition(t, stored, ready, metav1.ConditionTrue, pipeline.ReasonAllReady)
}
