package database

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// The API server's refusal of a child reaches the step's condition, with
// its message, instead of only the manager log. This suite runs without the
// webhooks, as a CR that bypassed admission would.

func TestOversizedConfigMapIsAConfigError(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"padding": strings.Repeat("x", 1100*1024)}}
	})
	c := s.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
	if !strings.Contains(c.Message, "Too long") || c.ObservedGeneration != s.ReadGlance().Generation {
		t.Errorf("SecretsReady %q at generation %d, want the API server's Too long at the current generation", c.Message, c.ObservedGeneration)
	}
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
}

func TestRefusedResourcesReachTheConditions(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")},
		}}
	})
	// The schema does not depend on the resources, so no db-sync Job is
	// made again; the Deployment's update is what the API server refuses.
	c := s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment)
	if !strings.Contains(c.Message, "must be greater than or equal to 0") {
		t.Errorf("DeploymentReady message %q, want the API server's refusal", c.Message)
	}
}

// TestRefusedPurgeScheduleLeavesDBPurgeReadyAlone: an invalid schedule is
// refused before any step, naming the field, and DBPurgeReady keeps the
// generation it was judged at instead of vouching for the new one.
func TestRefusedPurgeScheduleLeavesDBPurgeReadyAlone(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	before := s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Schedule: "not a schedule"} })
	c := s.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
	if !strings.Contains(c.Message, "spec.dbPurge.schedule") {
		t.Errorf("SecretsReady %q, want it to name spec.dbPurge.schedule", c.Message)
	}
	g := s.ReadGlance()
	for _, cond := range g.Status.Conditions {
		if cond.Type == v1alpha1.ConditionDBPurgeReady && cond.ObservedGeneration != before.ObservedGeneration {
			t.Errorf("DBPurgeReady observedGeneration %d, want the %d it was judged at", cond.ObservedGeneration, before.ObservedGeneration)
		}
	}
	if g.Status.ObservedGeneration != g.Generation {
		t.Errorf("status.observedGeneration %d, want %d", g.Status.ObservedGeneration, g.Generation)
	}
}
