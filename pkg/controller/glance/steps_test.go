package glance

import (
	"slices"
	"testing"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// The architecture's table: each sub_reconciler and the condition it
// reports, in pipeline order; the parallel group's members last.
var architecture = []struct{ step, condition string }{
	{"Secrets", v1alpha1.ConditionSecretsReady},
	{"DBConnectionSecret", v1alpha1.ConditionSecretsReady},
	{"Backends", v1alpha1.ConditionBackendsReady},
	{"Config", v1alpha1.ConditionSecretsReady},
	{"Database", v1alpha1.ConditionDatabaseReady},
	{"Deployment", v1alpha1.ConditionDeploymentReady},
	{"HTTPRoute", v1alpha1.ConditionHTTPRouteReady},
	{"HealthCheck", v1alpha1.ConditionGlanceAPIReady},
	{"HPA", v1alpha1.ConditionHPAReady},
	{"NetworkPolicy", v1alpha1.ConditionNetworkPolicyReady},
	{"DBPurge", v1alpha1.ConditionDBPurgeReady},
}

func TestStepsMapToTheirConditions(t *testing.T) {
	i := 0
	for _, stage := range Steps {
		for _, s := range stage.Steps() {
			if i >= len(architecture) {
				t.Fatalf("step %q is not in the architecture's table", s.Name)
			}
			want := architecture[i]
			if s.Name != want.step || s.Condition != want.condition {
				t.Errorf("step %d is %s/%s, want %s/%s", i, s.Name, s.Condition, want.step, want.condition)
			}
			if s.Run == nil {
				t.Errorf("step %s has no Run", s.Name)
			}
			i++
		}
	}
	// Steps are added in pipeline order; what exists must be a prefix of
	// the table, and the parallel group must be the last stage.
	for j, stage := range Steps {
		if stage.IsParallel() && j != len(Steps)-1 {
			t.Errorf("the parallel group is stage %d of %d, want the last", j, len(Steps))
		}
	}
	if i < 4 {
		t.Errorf("only %d steps wired, want at least Secrets, DBConnectionSecret, Backends and Config", i)
	}
	for _, s := range unresolvedSteps {
		for _, st := range s.Steps() {
			if st.Condition != v1alpha1.ConditionSecretsReady {
				t.Errorf("target resolution reports %s, want SecretsReady", st.Condition)
			}
		}
	}
}

// TestStepFailureReasonsAreEventReasons: a step error is announced under its
// FailureReason, so each is a documented event reason.
func TestStepFailureReasonsAreEventReasons(t *testing.T) {
	for _, stage := range Steps {
		for _, s := range stage.Steps() {
			if !slices.Contains(v1alpha1.EventReasons, s.FailureReason) {
				t.Errorf("step %s fails with %q, which v1alpha1.EventReasons does not list", s.Name, s.FailureReason)
			}
		}
	}
}
