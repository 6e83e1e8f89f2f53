package database

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// eventDelivery is how long the manager's event broadcaster, which sends
// asynchronously, gets to deliver an event a pass emitted.
const eventDelivery = 2 * time.Second

// A Ready Glance reconciled ten times emits no event: events mark
// transitions, never passes.
func TestReadyGlanceRepassedEmitsNoEvent(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)
	key := types.NamespacedName{Namespace: s.NS, Name: "glance"}
	s.awaitQuiet(key)
	time.Sleep(eventDelivery)
	before := s.glanceEvents()

	passes := 0
	for range 10 {
		passes += len(reconcileTrace.NextPasses(t, cl, "glance", s.ReadGlance()))
	}
	time.Sleep(eventDelivery)
	after := s.glanceEvents()
	if passes < 10 {
		t.Fatalf("%d passes seen, want at least 10", passes)
	}
	for reason, n := range after {
		if n != before[reason] {
			t.Errorf("event %s: %d before the %d passes, %d after", reason, before[reason], passes, n)
		}
	}
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)

	// A transition after them is counted, once: the count would have
	// seen an event of the passes.
	beta := fixtures.NewBackend(s.NS, "beta", "glance", false, "s3")
	beta.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"s3_store_host": "http://elsewhere"}
	s.Create(beta)
	s.ConditionSaying(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected, "skipped beta")
	time.Sleep(eventDelivery)
	skipped := corev1.EventTypeWarning + "/" + v1alpha1.EventGlanceBackendSkipped
	if got := s.glanceEvents()[skipped]; got != after[skipped]+1 {
		t.Errorf("%s counted %d times after skipping beta, want %d", skipped, got, after[skipped]+1)
	}
}

// glanceEvents counts the events regarding the Glance by reason, each
// repetition of a series included.
func (s *scene) glanceEvents() map[string]int {
	s.t.Helper()
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
		s.t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range list.Items {
		if e.Regarding.Kind != "Glance" {
			continue
		}
		n := 1
		if e.Series != nil {
			n = max(n, int(e.Series.Count))
		}
		counts[fmt.Sprintf("%s/%s", e.Type, e.Reason)] += n
	}
	return counts
}
