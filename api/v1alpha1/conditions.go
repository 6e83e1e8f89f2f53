package v1alpha1

// Condition types of a Glance. Ready aggregates the nine others.
const (
	ConditionReady              = "Ready"
	ConditionSecretsReady       = "SecretsReady"
	ConditionBackendsReady      = "BackendsReady"
	ConditionDatabaseReady      = "DatabaseReady"
	ConditionDeploymentReady    = "DeploymentReady"
	ConditionGlanceAPIReady     = "GlanceAPIReady"
	ConditionHPAReady           = "HPAReady"
	ConditionNetworkPolicyReady = "NetworkPolicyReady"
	ConditionHTTPRouteReady     = "HTTPRouteReady"
	ConditionDBPurgeReady       = "DBPurgeReady"

	// Reconciling and Stalled are the abnormal-true conditions kstatus
	// (sigs.k8s.io/cli-utils/pkg/kstatus, as Flux uses it) judges a custom
	// resource by, with status.observedGeneration: Reconciling True reads
	// as in progress, Stalled True as failed, neither as current. The
	// pipeline derives both from the nine sub-conditions on every pass
	// that is not paused.
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// SubConditions are the nine conditions Ready aggregates, in pipeline order.
var SubConditions = []string{
	ConditionSecretsReady,
	ConditionBackendsReady,
	ConditionDatabaseReady,
	ConditionDeploymentReady,
	ConditionHTTPRouteReady,
	ConditionGlanceAPIReady,
	ConditionHPAReady,
	ConditionNetworkPolicyReady,
	ConditionDBPurgeReady,
}

// Condition types of a GlanceBackend.
const (
	ConditionCredentialsReady = "CredentialsReady"
	ConditionConfigProjected  = "ConfigProjected"
)

// Condition reasons, as the architecture's Conditions table lists them.
const (
	ReasonAllReady    = "AllReady"
	ReasonNotAllReady = "NotAllReady"
	// Reasons of Reconciling: True while a sub-condition is not True
	// (Progressing); False once all are (Reconciled), or while Stalled is
	// True (Stalled). Stalled is False with NoFailure, and True with the
	// reason of the sub-condition that reports the failure.
	ReasonProgressing = "Progressing"
	ReasonReconciled  = "Reconciled"
	ReasonStalled     = "Stalled"
	ReasonNoFailure   = "NoFailure"
	// ReasonPaused: AnnotationPaused holds the Glance; Ready keeps the
	// status it had. Also the reason of the event that announces it.
	ReasonPaused = "Paused"

	ReasonSecretsAvailable                 = "SecretsAvailable"
	ReasonTargetClusterUnavailable         = "TargetClusterUnavailable"
	ReasonSecretStoreNotReady              = "SecretStoreNotReady"
	ReasonWaitingForDBCredentials          = "WaitingForDBCredentials"
	ReasonWaitingForServiceUserCredentials = "WaitingForServiceUserCredentials"
	ReasonConfigError                      = "ConfigError"

	ReasonAllBackendsProjected = "AllBackendsProjected"
	ReasonWaitingForBackends   = "WaitingForBackends"
	ReasonNoDefaultBackend     = "NoDefaultBackend"
	// ReasonBackendsProjectionFailed: the backends could not be read or
	// their Secret rendered or written; the message carries the error.
	ReasonBackendsProjectionFailed = "BackendsProjectionFailed"

	ReasonDatabaseSynced        = "DatabaseSynced"
	ReasonClusterNotReady       = "ClusterNotReady"
	ReasonWaitingForDatabase    = "WaitingForDatabase"
	ReasonDBSyncFailed          = "DBSyncFailed"
	ReasonDBSyncInProgress      = "DBSyncInProgress"
	ReasonImageReleaseMismatch  = "ImageReleaseMismatch"
	ReasonVersionParseError     = "VersionParseError"
	ReasonDowngradeNotSupported = "DowngradeNotSupported"
	ReasonUpgradePathInvalid    = "UpgradePathInvalid"
	ReasonUpgradeTargetChanged  = "UpgradeTargetChanged"
	ReasonExpandInProgress      = "ExpandInProgress"
	ReasonMigrateInProgress     = "MigrateInProgress"
	ReasonUpgradeRollingUpdate  = "UpgradeRollingUpdate"
	ReasonContractInProgress    = "ContractInProgress"
	ReasonExpandFailed          = "ExpandFailed"
	ReasonMigrateFailed         = "MigrateFailed"
	ReasonContractFailed        = "ContractFailed"
	// ReasonDatabaseObjectConflict: a database object the Glance needs (its
	// Database, a User or Grant, their Secrets), or the SQL user one makes,
	// is another owner's; the message names it and its owner. The operator
	// neither adopts, changes nor deletes it.
	ReasonDatabaseObjectConflict = "DatabaseObjectConflict"
	// ReasonDatabaseUserRotating: the schema is synced, and a database user
	// rotation waits; the message says for what (the other user to be
	// Ready, the pods or a Job still connecting as the old one).
	ReasonDatabaseUserRotating = "DatabaseUserRotating"

	ReasonDeploymentReady      = "DeploymentReady"
	ReasonWaitingForDeployment = "WaitingForDeployment"

	ReasonAPIHealthy         = "APIHealthy"
	ReasonAPIUnhealthy       = "APIUnhealthy"
	ReasonEndpointNotReady   = "EndpointNotReady"
	ReasonHealthCheckTimeout = "HealthCheckTimeout"
	ReasonConnectionFailed   = "ConnectionFailed"
	ReasonHealthCheckFailed  = "HealthCheckFailed"

	ReasonHPAReady       = "HPAReady"
	ReasonHPANotRequired = "HPANotRequired"
	// ReasonHPAFailed: the HPA could not be rendered or applied; the message
	// carries the error, the API server's refusal included.
	ReasonHPAFailed = "HPAFailed"

	ReasonNetworkPolicyReady       = "NetworkPolicyReady"
	ReasonNetworkPolicyNotRequired = "NetworkPolicyNotRequired"
	// ReasonNetworkPolicyFailed: the NetworkPolicy could not be rendered or
	// applied; the message carries the error.
	ReasonNetworkPolicyFailed = "NetworkPolicyFailed"

	ReasonHTTPRouteAccepted      = "HTTPRouteAccepted"
	ReasonHTTPRouteNotRequired   = "HTTPRouteNotRequired"
	ReasonHTTPRouteNotAccepted   = "HTTPRouteNotAccepted"
	ReasonGatewayAPINotInstalled = "GatewayAPINotInstalled"
	ReasonCapabilityProbeFailed  = "CapabilityProbeFailed"

	ReasonDBPurgeScheduled = "DBPurgeScheduled"
	ReasonDBPurgeSuspended = "DBPurgeSuspended"
	ReasonDBPurgeJobFailed = "DBPurgeJobFailed"
	// ReasonDBPurgeCronJobFailed: the purge CronJob could not be rendered
	// or applied, or its runs listed; the message carries the error.
	ReasonDBPurgeCronJobFailed = "DBPurgeCronJobFailed"

	// GlanceBackend reasons beyond the shared ones.
	ReasonWaitingForParent      = "WaitingForParent"
	ReasonCredentialsAvailable  = "CredentialsAvailable"
	ReasonWaitingForCredentials = "WaitingForCredentials"
	ReasonConfigProjected       = "ConfigProjected"
	ReasonWaitingForProjection  = "WaitingForProjection"
)

// BackendSubConditions are the conditions a GlanceBackend's Ready
// aggregates.
var BackendSubConditions = []string{ConditionCredentialsReady, ConditionConfigProjected}
