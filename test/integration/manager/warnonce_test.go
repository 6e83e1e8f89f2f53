package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// TestPersistingConfigErrorWarnsOnce: the Config step fails on every retry,
// the API server refusing a config ConfigMap larger than a ConfigMap may be,
// while the Secrets step, which shares SecretsReady with it, sets
// SecretsReady True earlier in each pass. The cause does not change, so it
// is one Warning event however many passes fail on it.
func TestPersistingConfigErrorWarnsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.InstallBrownfield()
	key := client.ObjectKey{Namespace: e.NS, Name: "glance"}
	from := time.Now()
	e.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"padding": strings.Repeat("x", 1100*1024)}}
	})
	e.ConditionSaying(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError, "Too long")

	// The error is retried with backoff: wait for several failed passes.
	const passes = 5
	failed := 0
	e.Eventually(fmt.Sprintf("%d failed passes", passes), func() bool {
		failed = 0
		for _, p := range reconcileTrace.Passes("glance", key) {
			if p.Started.After(from) && p.Outcome == operatortest.OutcomeError {
				failed++
			}
		}
		return failed >= passes
	}, func() string { return fmt.Sprintf("%d failed passes", failed) })

	e.Eventually("a ConfigError Warning", func() bool { return configErrorWarnings(t, e) > 0 }, nil)
	// The events are sent after the passes, asynchronously: a repeat would
	// arrive within this window, as a new event or a series count.
	e.Consistently("exactly one ConfigError Warning", 3*time.Second, func() bool {
		n := configErrorWarnings(t, e)
		if n != 1 {
			t.Logf("%d ConfigError Warnings after %d failed passes", n, failed)
		}
		return n == 1
	})
}

// configErrorWarnings counts the ConfigError Warnings emitted on the
// Glance: each event once, and each repeat the recorder folded into its
// series.
func configErrorWarnings(t *testing.T, e *operatortest.Env) int {
	t.Helper()
	var events eventsv1.EventList
	if err := cl.List(context.Background(), &events, client.InNamespace(e.NS)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events.Items {
		if ev.Type != corev1.EventTypeWarning || ev.Reason != v1alpha1.ReasonConfigError || ev.Regarding.Kind != "Glance" {
			continue
		}
		n++
		if ev.Series != nil && ev.Series.Count > 1 {
			n += int(ev.Series.Count) - 1
		}
	}
	return n
}
