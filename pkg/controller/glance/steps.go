package glance

import (
	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
)

type step = pipeline.Step[*v1alpha1.Glance, *pass]

// Steps is the Glance pipeline: the names are the sub_reconciler label
// values, each paired with the condition it reports.
var Steps = []pipeline.Stage[*v1alpha1.Glance, *pass]{
	pipeline.Single(step{Name: "Secrets", Condition: v1alpha1.ConditionSecretsReady, Run: reconcileSecrets}),
	pipeline.Single(step{Name: "DBConnectionSecret", Condition: v1alpha1.ConditionSecretsReady, Run: reconcileDBConnectionSecret}),
	pipeline.Single(step{Name: "Backends", Condition: v1alpha1.ConditionBackendsReady, Run: reconcileBackends}),
	pipeline.Single(step{Name: "Config", Condition: v1alpha1.ConditionSecretsReady, Run: reconcileConfig}),
	pipeline.Single(step{Name: "Database", Condition: v1alpha1.ConditionDatabaseReady, Run: reconcileDatabase}),
	pipeline.Single(step{Name: "Deployment", Condition: v1alpha1.ConditionDeploymentReady, Run: reconcileDeployment}),
	pipeline.Parallel(
		step{Name: "HTTPRoute", Condition: v1alpha1.ConditionHTTPRouteReady, Run: reconcileHTTPRoute},
		step{Name: "HealthCheck", Condition: v1alpha1.ConditionGlanceAPIReady, Run: reconcileHealthCheck},
		step{Name: "HPA", Condition: v1alpha1.ConditionHPAReady, Run: reconcileHPA},
		step{Name: "NetworkPolicy", Condition: v1alpha1.ConditionNetworkPolicyReady, Run: reconcileNetworkPolicy},
		step{Name: "DBPurge", Condition: v1alpha1.ConditionDBPurgeReady, Run: reconcileDBPurge},
	),
}

// unresolvedSteps report an unresolvable targetClusterRef in place of the
// pipeline; it is a SecretsReady reason, so it counts under Secrets.
var unresolvedSteps = []pipeline.Stage[*v1alpha1.Glance, *pass]{
	pipeline.Single(step{Name: "Secrets", Condition: v1alpha1.ConditionSecretsReady, Run: targetUnavailable}),
}
