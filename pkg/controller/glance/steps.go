package glance

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
)

type step = pipeline.Step[*v1alpha1.Glance, *pass]

// Steps is the Glance pipeline: the names are the sub_reconciler label
// values, each paired with the condition it reports and the reason that
// condition takes, with the error as its message, when the step fails.
var Steps = []pipeline.Stage[*v1alpha1.Glance, *pass]{
	pipeline.Single(step{Name: "Secrets", Condition: v1alpha1.ConditionSecretsReady, FailureReason: v1alpha1.ReasonConfigError, Run: reconcileSecrets}),
	pipeline.Single(step{Name: "DBConnectionSecret", Condition: v1alpha1.ConditionSecretsReady, FailureReason: v1alpha1.ReasonConfigError, Run: reconcileDBConnectionSecret}),
	pipeline.Single(step{Name: "Backends", Condition: v1alpha1.ConditionBackendsReady, FailureReason: v1alpha1.ReasonBackendsProjectionFailed, Run: reconcileBackends}),
	pipeline.Single(step{Name: "Config", Condition: v1alpha1.ConditionSecretsReady, FailureReason: v1alpha1.ReasonConfigError, Run: reconcileConfig}),
	pipeline.Single(step{Name: "Database", Condition: v1alpha1.ConditionDatabaseReady, FailureReason: v1alpha1.ReasonWaitingForDatabase, Run: reconcileDatabase}),
	pipeline.Single(step{Name: "Deployment", Condition: v1alpha1.ConditionDeploymentReady, FailureReason: v1alpha1.ReasonWaitingForDeployment, Run: reconcileDeployment}),
	pipeline.Parallel(
		step{Name: "HTTPRoute", Condition: v1alpha1.ConditionHTTPRouteReady, FailureReason: v1alpha1.ReasonHTTPRouteNotAccepted, Run: reconcileHTTPRoute},
		step{Name: "HealthCheck", Condition: v1alpha1.ConditionGlanceAPIReady, FailureReason: v1alpha1.ReasonHealthCheckFailed, Run: reconcileHealthCheck},
		step{Name: "HPA", Condition: v1alpha1.ConditionHPAReady, FailureReason: v1alpha1.ReasonHPAFailed, Run: reconcileHPA},
		step{Name: "NetworkPolicy", Condition: v1alpha1.ConditionNetworkPolicyReady, FailureReason: v1alpha1.ReasonNetworkPolicyFailed, Run: reconcileNetworkPolicy},
		step{Name: "DBPurge", Condition: v1alpha1.ConditionDBPurgeReady, FailureReason: v1alpha1.ReasonDBPurgeCronJobFailed, MergeStatus: mergeDBPurgeStatus, Run: reconcileDBPurge},
	),
}

// unresolvedSteps report an unresolvable targetClusterRef in place of the
// pipeline; it is a SecretsReady reason, so it counts under Secrets.
var unresolvedSteps = []pipeline.Stage[*v1alpha1.Glance, *pass]{
	pipeline.Single(step{Name: "Secrets", Condition: v1alpha1.ConditionSecretsReady, FailureReason: v1alpha1.ReasonConfigError, Run: targetUnavailable}),
}

// refusedSteps report a spec the admission rules refuse in place of the
// pipeline: nothing is rendered from it, and what runs keeps its last good
// config. It is a config error, so it counts under Config.
var refusedSteps = []pipeline.Stage[*v1alpha1.Glance, *pass]{
	pipeline.Single(step{Name: "Config", Condition: v1alpha1.ConditionSecretsReady, Run: specRefused}),
}

// stepFailed announces a step error under the reason its condition took,
// once per cause: the pipeline calls it only when that reason is new.
func stepFailed(ctx context.Context, g *v1alpha1.Glance, p *pass, s step, reason, message string) {
	announce(ctx, p, g, nil, corev1.EventTypeWarning, reason, s.Name, "%s", message)
}

// stalls says which sub-conditions that are not True report a failure, for
// Stalled (kstatus's Failed), rather than something still under way: a
// schema or purge Job that failed, and a release change the Database step
// refuses. A failed Job is retried, yet it stalls: it fails again unless
// something changes, and a Flux wait should end on it rather than on its
// timeout; the retry's run reads as Reconciling again. What only a spec
// change fixes (a refused spec, a config or child that cannot be rendered)
// ends its pass on a terminal error, which stalls the step's condition
// whatever its reason; waits (credentials, backends, a rollout, the
// health probe) and retried API errors are Reconciling.
func stalls(c metav1.Condition) bool {
	switch c.Type {
	case v1alpha1.ConditionDatabaseReady:
		switch c.Reason {
		case v1alpha1.ReasonDBSyncFailed, v1alpha1.ReasonExpandFailed, v1alpha1.ReasonMigrateFailed, v1alpha1.ReasonContractFailed,
			v1alpha1.ReasonDatabaseObjectConflict, v1alpha1.ReasonVersionParseError, v1alpha1.ReasonDowngradeNotSupported, v1alpha1.ReasonUpgradePathInvalid,
			v1alpha1.ReasonImageReleaseMismatch, v1alpha1.ReasonUpgradeTargetChanged:
			return true
		}
	case v1alpha1.ConditionDBPurgeReady:
		return c.Reason == v1alpha1.ReasonDBPurgeJobFailed
	}
	return false
}

// readyDetail adds to Ready's entry for DatabaseReady the attempt of a
// schema Job that fails, and when it runs again, or what a database user
// rotation waits for.
func readyDetail(g *v1alpha1.Glance, c metav1.Condition) string {
	if c.Type == v1alpha1.ConditionDatabaseReady && c.Reason == v1alpha1.ReasonDatabaseUserRotating {
		// What a rotation waits for is the whole point of the entry.
		return c.Message
	}
	r := g.Status.SchemaJobRetry
	if c.Type != v1alpha1.ConditionDatabaseReady || r == nil {
		return ""
	}
	switch c.Reason {
	case v1alpha1.ReasonDBSyncFailed, v1alpha1.ReasonExpandFailed, v1alpha1.ReasonMigrateFailed, v1alpha1.ReasonContractFailed:
		return fmt.Sprintf("attempt %d, next at %s", r.Failures, r.NextAttemptTime.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("attempt %d", r.Failures+1)
}

// terminalFailure ends a step on what only a spec change can fix (and that
// triggers a reconcile): condition is False with reason and msg, and the
// error is terminal, so the pass is not retried.
func terminalFailure(g *v1alpha1.Glance, condition, reason, msg string) (ctrl.Result, error) {
	pipeline.SetCondition(g, condition, metav1.ConditionFalse, reason, msg)
	return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
}
