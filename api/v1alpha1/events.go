package v1alpha1

// Reasons of the events the operator emits on a Glance (the Warning ones
// name what needs a person), beyond the condition reasons it also uses as
// event reasons (ReasonDBPurgeJobFailed, the refused-upgrade reasons).
const (
	// EventRemoteChildrenAbandoned: the Glance was deleted while its target
	// cluster was gone; the note names what stays behind there.
	EventRemoteChildrenAbandoned = "RemoteChildrenAbandoned"
	// EventFinalizingDatabase and EventDatabaseFinalized bracket the
	// deletion of the MariaDB objects before the finalizer is released.
	EventFinalizingDatabase = "FinalizingDatabase"
	EventDatabaseFinalized  = "DatabaseFinalized"
	// EventNetworkPolicyRefused: spec.networkPolicy cannot be rendered.
	EventNetworkPolicyRefused = "NetworkPolicyRefused"
	// EventGlanceBackendSkipped: an attached backend is left out of the
	// projection; the note says why.
	EventGlanceBackendSkipped = "GlanceBackendSkipped"
	// EventDeploymentRolloutComplete: the Deployment has rolled out.
	EventDeploymentRolloutComplete = "DeploymentRolloutComplete"
	// The upgrade flow: initiated, each phase done, aborted, complete.
	EventUpgradeInitiated = "UpgradeInitiated"
	EventExpandComplete   = "ExpandComplete"
	EventMigrateComplete  = "MigrateComplete"
	EventUpgradeAborted   = "UpgradeAborted"
	EventUpgradeComplete  = "UpgradeComplete"
	// EventImageCacheEvicted: the kubelet evicted one of the Glance's pods
	// because its image-cache emptyDir exceeded its size limit; once per
	// pod, the note names the pod and the limit.
	EventImageCacheEvicted = "ImageCacheEvicted"
	// EventResumed: AnnotationPaused was removed and the operator
	// reconciles the Glance again (ReasonPaused announced the pause).
	EventResumed = "Resumed"
	// A database password rotation of a managed Glance: the other user
	// slot's user is made with the new password, the pods roll onto it
	// once it is Ready, and the old user is dropped once none connects as
	// it. The notes name the users, never a password.
	EventDatabaseUserCreating = "DatabaseUserCreating"
	EventDatabaseUserSwitched = "DatabaseUserSwitched"
	EventDatabaseUserDropped  = "DatabaseUserDropped"
)

// EventReasons are the reasons of every event the operator emits: the
// constants above, the condition reason of a failed db-purge run, those of
// a refused upgrade and of a failed schema Job run, and the failure
// reasons of the Glance pipeline's steps. docs/operations.md lists them.
var EventReasons = []string{
	EventRemoteChildrenAbandoned, EventFinalizingDatabase, EventDatabaseFinalized, EventNetworkPolicyRefused,
	EventGlanceBackendSkipped, EventDeploymentRolloutComplete, EventImageCacheEvicted, ReasonPaused, EventResumed,
	EventDatabaseUserCreating, EventDatabaseUserSwitched, EventDatabaseUserDropped, ReasonDatabaseUserRotating,
	EventUpgradeInitiated, EventExpandComplete, EventMigrateComplete, EventUpgradeAborted, EventUpgradeComplete,
	ReasonDBPurgeJobFailed, ReasonVersionParseError, ReasonDowngradeNotSupported, ReasonUpgradePathInvalid,
	ReasonDBSyncFailed, ReasonExpandFailed, ReasonMigrateFailed, ReasonContractFailed, ReasonDatabaseObjectConflict,
	ReasonConfigError, ReasonBackendsProjectionFailed, ReasonWaitingForDatabase, ReasonWaitingForDeployment,
	ReasonHTTPRouteNotAccepted, ReasonHealthCheckFailed, ReasonHPAFailed, ReasonNetworkPolicyFailed,
	ReasonDBPurgeCronJobFailed,
}
