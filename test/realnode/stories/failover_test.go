package stories

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/realnode"
)

// failover: the leading manager pod is deleted; another pod of the chart
// takes over and reconciles a spec change (three replicas), and the Glance
// pods that were running go on without a restart.
func (s *scene) failover(t *testing.T) {
	pods := s.podUIDs(t)
	leader := env.LeaseHolder(t, "")
	leaderPod, _, _ := strings.Cut(leader, "_")
	start := time.Now()
	if err := env.CS.CoreV1().Pods(realnode.OperatorNamespace).Delete(t.Context(), leaderPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deleted leader releases the lease on SIGTERM; the standby or
	// the ReplicaSet's replacement, whichever asks first, takes it.
	next := env.LeaseHolder(t, leader)
	t.Logf("failover: %s deleted, %s leads %s later", leaderPod, next, time.Since(start).Round(100*time.Millisecond))
	nextPod, _, _ := strings.Cut(next, "_")
	if nextPod == leaderPod {
		t.Errorf("after deleting %s it still holds the lease (%q)", leaderPod, next)
	}
	if _, err := env.CS.CoreV1().Pods(realnode.OperatorNamespace).Get(t.Context(), nextPod, metav1.GetOptions{}); err != nil {
		t.Errorf("the lease went to %q, not a pod of the chart: %v", next, err)
	}

	g := s.waitReady(t, 0)
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.Deployment.Replicas = ptr.To[int32](3)
	if err := cl.Patch(t.Context(), g, patch); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t, g.Generation-1)
	d := s.deployment(t)
	if *d.Spec.Replicas != 3 || d.Status.AvailableReplicas != 3 {
		t.Errorf("after the new leader reconciled replicas 3, the Deployment wants %d and has %d available", *d.Spec.Replicas, d.Status.AvailableReplicas)
	}
	after := s.podUIDs(t)
	for uid, restarts := range pods {
		got, ok := after[uid]
		if !ok {
			t.Errorf("Glance pod %s was replaced across the failover (before %v, after %v)", uid, pods, after)
		} else if got != restarts {
			t.Errorf("Glance pod %s restarted across the failover: %d restarts, had %d", uid, got, restarts)
		}
	}
	if len(after) != 3 {
		t.Errorf("running Glance pods after scaling to 3: %v", slices.Collect(maps.Keys(after)))
	}
}
