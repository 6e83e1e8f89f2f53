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
)
