package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// TestKstatusJudgesTheGlance drives one Glance through what a GitOps tool
// must tell apart, and asks kstatus (the library Flux judges health with)
// for its verdict in each state, on the Glance as read from the API server:
// installing, a retried db-sync and a rollout are InProgress; a failed
// schema Job and a refused spec are Failed; paused with a spec change the
// pause holds back is InProgress; Ready is Current.
func TestKstatusJudgesTheGlance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	mgr.Prober.Answer("http://glance."+e.NS+".svc."+render.DefaultClusterDomain+":9292/healthcheck",
		glance.HTTPProber{Redirect: operatortest.HealthyAddress()})
	e.Credentials("pw")
	e.DefaultBackend("primary")
	e.Glance(operatortest.Brownfield)

	judge(t, e, "installing: the db-sync Job runs", kstatus.InProgressStatus, "",
		hasCondition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress))

	failed := e.FinishJob("glance-db-sync", false)
	judge(t, e, "the db-sync Job failed", kstatus.FailedStatus, v1alpha1.ConditionDatabaseReady,
		hasCondition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncFailed))

	// A new config runs the failed Job again at once: the retry is under way.
	goodConfig := func(g *v1alpha1.Glance) {
		g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": "1099511627776"}}
	}
	e.UpdateGlance(goodConfig)
	e.Eventually("the db-sync Job run again", func() bool {
		var j batchv1.Job
		err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-sync"}, &j)
		return err == nil && j.UID != failed.UID && j.DeletionTimestamp == nil
	}, nil)
	judge(t, e, "the db-sync Job runs again", kstatus.InProgressStatus, "",
		hasCondition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress))

	e.FinishJob("glance-db-sync", true)
	judge(t, e, "installing: the Deployment rolls out", kstatus.InProgressStatus, "",
		hasCondition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced),
		hasCondition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment))

	e.RollOut()
	judge(t, e, "Ready", kstatus.CurrentStatus, "",
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady))

	// Paused, nothing is held back yet: still current.
	e.SetPaused("true")
	judge(t, e, "paused, the spec applied", kstatus.CurrentStatus, "",
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPaused))
	replicas := ptr.Deref(e.Deployment(nil).Spec.Replicas, 1)
	e.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To(replicas + 1)}
	})
	g := judge(t, e, "paused, a spec change held back", kstatus.InProgressStatus, "",
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPaused))
	if g.Status.ObservedGeneration == g.Generation {
		t.Errorf("a paused pass stamped observedGeneration %d: the held-back spec reads as applied", g.Status.ObservedGeneration)
	}

	e.SetPaused("")
	e.Deployment(func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 1) == replicas+1 })
	judge(t, e, "resumed: the held-back change rolls out", kstatus.InProgressStatus, "",
		hasCondition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment))
	e.RollOut()
	judge(t, e, "Ready again", kstatus.CurrentStatus, "",
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady))

	// A spec the admission rules refuse (one that bypassed the webhook)
	// renders nothing until it changes.
	e.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": "1\n[DEFAULT]\ndebug = true"}}
	})
	judge(t, e, "a refused spec", kstatus.FailedStatus, v1alpha1.ConditionSecretsReady,
		hasCondition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError))
	// Back to the config that runs: nothing to render anew, nothing to roll.
	e.UpdateGlance(goodConfig)
	judge(t, e, "Ready on a fixed spec", kstatus.CurrentStatus, "",
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady))

	e.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease, g.Spec.Image.Tag = "2026.1", "2026.1" })
	judge(t, e, "upgrading: the expand Job runs", kstatus.InProgressStatus, "",
		hasCondition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandInProgress))
	e.FinishJob("glance-db-expand", false)
	judge(t, e, "upgrading: the expand Job failed", kstatus.FailedStatus, v1alpha1.ConditionDatabaseReady,
		hasCondition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandFailed))
}

// glanceMatch says whether the Glance as read is in the state under test.
type glanceMatch func(*v1alpha1.Glance) bool

// hasCondition matches a Glance whose condition typ has status and reason,
// judged at its current generation.
func hasCondition(typ string, status metav1.ConditionStatus, reason string) glanceMatch {
	return func(g *v1alpha1.Glance) bool {
		c := meta.FindStatusCondition(g.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == g.Generation
	}
}

// judge waits until the Glance, read from the API server as Flux reads it,
// matches all of state, then checks kstatus's verdict on that very read:
// want, and for Failed a message that names the stalled condition. It
// returns the Glance it judged.
func judge(t *testing.T, e *operatortest.Env, state string, want kstatus.Status, stalledOn string, match ...glanceMatch) *v1alpha1.Glance {
	t.Helper()
	var u *unstructured.Unstructured
	g := &v1alpha1.Glance{}
	e.Eventually(state, func() bool {
		u = &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Glance"))
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: "glance"}, u); err != nil {
			return false
		}
		g = &v1alpha1.Glance{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, g); err != nil {
			t.Fatal(err)
		}
		for _, m := range match {
			if !m(g) {
				return false
			}
		}
		return true
	}, func() string { return conditionSummary(g) })
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatalf("%s: kstatus: %v", state, err)
	}
	if res.Status != want {
		t.Errorf("%s: kstatus says %s (%q), want %s; generation %d, observedGeneration %d, %s",
			state, res.Status, res.Message, want, g.Generation, g.Status.ObservedGeneration, conditionSummary(g))
	} else if stalledOn != "" && !strings.HasPrefix(res.Message, stalledOn+": ") {
		t.Errorf("%s: kstatus's message %q does not name %s", state, res.Message, stalledOn)
	}
	return g
}

// conditionSummary lists the Glance's conditions as type=status/reason.
func conditionSummary(g *v1alpha1.Glance) string {
	var parts []string
	for _, c := range g.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s@%d", c.Type, c.Status, c.Reason, c.ObservedGeneration))
	}
	return "conditions " + strings.Join(parts, " ")
}
