package database

import (
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// TestStaleCacheIsGivenUp: a cached Glance that stays older than the
// manager's own last write to it (the versions went back, as after an etcd
// restore the rewind check missed) holds the Glance for the stale-cache
// limit, passes waiting for the cache meanwhile, and is then taken as
// current: a spec change made in between is applied, not before the limit.
// The operator is made to read one of its status writes back with a
// resourceVersion far ahead of the server's, which its cache never reaches:
// what it would have recorded before a restore took the server back.
func TestStaleCacheIsGivenUp(t *testing.T) {
	t.Parallel()
	const limit = 3 * time.Second
	s := newScene(t, func(o *operator.Options) { o.StaleCacheLimit = limit })
	s.InstallBrownfield()
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	key := client.ObjectKey{Namespace: s.NS, Name: "glance"}
	s.awaitQuiet(key)

	var mu sync.Mutex
	var wrote time.Time
	s.Manager.AfterStatusWrite(func(obj client.Object) {
		g, ok := obj.(*v1alpha1.Glance)
		if !ok || client.ObjectKeyFromObject(g) != key {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !wrote.IsZero() {
			return
		}
		rv, err := strconv.ParseUint(g.ResourceVersion, 10, 64)
		if err != nil {
			t.Errorf("resourceVersion %q: %v", g.ResourceVersion, err)
			return
		}
		g.ResourceVersion = strconv.FormatUint(rv+1_000_000_000, 10)
		wrote = time.Now()
	})
	written := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return wrote
	}
	replicas := func(n int32) func(*v1alpha1.Glance) {
		return func(g *v1alpha1.Glance) { g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To(n)} }
	}
	s.UpdateGlance(replicas(4))
	s.Eventually("a status write read back ahead of the server", func() bool { return !written().IsZero() }, nil)
	s.Manager.AfterStatusWrite(nil)
	s.UpdateGlance(replicas(5))

	s.Deployment(func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 0) == 5 })
	if waited := time.Since(written()); waited < limit {
		t.Errorf("the change was applied %s after the write the cache never reached, before the limit of %s", waited, limit)
	}
	stale := 0
	for _, p := range reconcileTrace.Passes("glance", key) {
		if p.Started.After(written()) && p.Outcome == operatortest.OutcomeRequeueAfter && p.After == pipeline.StaleCacheRetry {
			stale++
		}
	}
	if stale == 0 {
		t.Errorf("no pass waited for the cache (RequeueAfter %s) before the limit; passes %v", pipeline.StaleCacheRetry, reconcileTrace.Passes("glance", key))
	}
	// Taken as current, the Glance converges as before.
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
}
