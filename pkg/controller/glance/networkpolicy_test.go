package glance

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// A refused NetworkPolicy is announced when the refusal starts; the passes
// that repeat it, with the condition already saying so, stay quiet.
func TestNetworkPolicyRefusalAnnouncedOnce(t *testing.T) {
	scheme := testScheme(t)
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	// An empty ingress list admits no one: the CRD refuses it, so only a
	// Glance that bypassed the schema has it.
	g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(g).Build()
	recorder := events.NewFakeRecorder(10)
	p := &pass{r: &Reconciler{Client: c, Recorder: recorder}, cluster: &targetcluster.Cluster{Client: c, Reader: c, Scheme: scheme}}

	for pass := range 3 {
		_, err := reconcileNetworkPolicy(context.Background(), g, p)
		if err == nil {
			t.Fatal("an empty ingress list was not refused")
		}
		// What the pipeline records of a failed step.
		msg := err.Error()
		var unwrapped interface{ Unwrap() error }
		if errors.As(err, &unwrapped) && unwrapped.Unwrap() != nil {
			msg = unwrapped.Unwrap().Error()
		}
		pipeline.SetCondition(g, v1alpha1.ConditionNetworkPolicyReady, metav1.ConditionFalse, "NetworkPolicyFailed", msg)
		select {
		case ev := <-recorder.Events:
			if pass > 0 {
				t.Errorf("pass %d repeated the refusal's event %q", pass+1, ev)
			} else if !strings.Contains(ev, v1alpha1.EventNetworkPolicyRefused) {
				t.Errorf("event %q, want %s", ev, v1alpha1.EventNetworkPolicyRefused)
			}
		default:
			if pass == 0 {
				t.Error("no event for the refusal")
			}
		}
	}
}
