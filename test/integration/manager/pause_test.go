package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// TestPausedGlanceChangesNothing: while the pause annotation is set, a spec
// change and a deleted child wait, Ready keeps its status and says why, and
// one Paused event says so; removed, the operator catches up and says
// Resumed once. A paused Glance still goes when deleted.
func TestPausedGlanceChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.InstallBrownfield()
	e.RollOut()
	e.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	replicas := ptr.Deref(e.Deployment(nil).Spec.Replicas, 1)
	service := &corev1.Service{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance"}, service); err != nil {
		t.Fatal(err)
	}

	e.SetPaused("true")
	waitPaused(t, e)
	applied := e.ReadGlance().Status.ObservedGeneration
	e.UpdateGlance(func(g *v1alpha1.Glance) {
		if g.Spec.Deployment == nil {
			g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{}
		}
		g.Spec.Deployment.Replicas = ptr.To(replicas + 1)
	})
	if err := cl.Delete(ctx, service); err != nil {
		t.Fatal(err)
	}
	var g *v1alpha1.Glance
	e.Eventually("a paused pass on the changed spec", func() bool {
		g = e.ReadGlance()
		c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonPaused && c.ObservedGeneration == g.Generation
	}, func() string { return fmt.Sprintf("status %+v", g.Status) })
	// The pause applied nothing of the change, so its generation is not
	// observed: tools judging by observedGeneration see it waits.
	if g.Status.ObservedGeneration != applied {
		t.Errorf("status.observedGeneration %d after a paused pass on generation %d, want %d, the last one applied", g.Status.ObservedGeneration, g.Generation, applied)
	}
	// The Service's deletion wakes passes too; the pass after a wake-up
	// that follows it has seen the Service gone, and must not bring it back.
	reconcileTrace.NextPasses(t, cl, "glance", g)
	if got := ptr.Deref(e.Deployment(nil).Spec.Replicas, 1); got != replicas {
		t.Errorf("a paused Glance's Deployment went to %d replicas", got)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(service), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("a paused Glance's deleted Service: %v, want it still gone", err)
	}
	if n := pauseEvents(t, e, v1alpha1.ReasonPaused); n != 1 {
		t.Errorf("%d Paused events, want 1", n)
	}

	e.SetPaused("")
	e.Deployment(func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 1) == replicas+1 })
	e.Eventually("the Service made again", func() bool {
		return cl.Get(ctx, client.ObjectKeyFromObject(service), &corev1.Service{}) == nil
	}, func() string { return "" })
	e.Eventually("one Resumed event", func() bool { return pauseEvents(t, e, v1alpha1.EventResumed) == 1 }, func() string { return "" })
	if c := meta.FindStatusCondition(e.ReadGlance().Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason == v1alpha1.ReasonPaused {
		t.Errorf("Ready after the pause ended: %+v", c)
	}

	e.SetPaused("true")
	waitPaused(t, e)
	if err := cl.Delete(ctx, e.ReadGlance()); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the paused Glance deleted", func() bool {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance"}, &v1alpha1.Glance{}))
	}, func() string { return fmt.Sprint(e.ReadGlance().Finalizers) })
	if n := pauseEvents(t, e, v1alpha1.ReasonPaused); n != 2 {
		t.Errorf("%d Paused events after the second pause, want 2", n)
	}
}

// waitPaused waits until Ready says the Glance is paused, with the status
// it had before the pause.
func waitPaused(t *testing.T, e *operatortest.Env) {
	t.Helper()
	var ready *metav1.Condition
	e.Eventually("Ready with reason Paused", func() bool {
		ready = meta.FindStatusCondition(e.ReadGlance().Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Reason == v1alpha1.ReasonPaused
	}, func() string { return fmt.Sprintf("%+v", ready) })
	if !strings.Contains(ready.Message, v1alpha1.AnnotationPaused) {
		t.Errorf("Ready's message while paused: %q", ready.Message)
	}
}

// pauseEvents counts the events of reason regarding the Glance.
func pauseEvents(t *testing.T, e *operatortest.Env, reason string) int {
	t.Helper()
	var events eventsv1.EventList
	if err := cl.List(context.Background(), &events, client.InNamespace(e.NS)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events.Items {
		if ev.Reason == reason && ev.Regarding.Kind == "Glance" {
			n++
		}
	}
	return n
}
