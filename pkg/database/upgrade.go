// Package database decides what the Database step does about the schema: the
// db-sync of a fresh install or a patch change, and the expand-migrate-
// contract phase machine of a release upgrade. Decide is pure: it reads the
// spec, the persisted status and the state of the Jobs, and returns what to
// do next. The phase lives in status, so a restarted manager resumes.
package database

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
)

// JobKind names a schema Job; the Job is called {glance}-{kind}.
type JobKind string

// The schema Jobs.
const (
	Sync     JobKind = "db-sync"
	Expand   JobKind = "db-expand"
	Migrate  JobKind = "db-migrate"
	Contract JobKind = "db-contract"
)

// PhaseJobs are the Jobs of an upgrade, deleted when it is aborted or
// complete.
var PhaseJobs = []JobKind{Expand, Migrate, Contract}

// JobState is what the Job of a kind has come to. A Job still running
// counts as running whatever its pod template; a finished one with another
// template than the current counts as absent, so that it runs again, except
// that a phase Job that succeeded for this upgrade (the same image) stays
// succeeded: what it ran with is pinned when its phase starts.
type JobState int

// Job states.
const (
	JobAbsent JobState = iota
	JobRunning
	JobSucceeded
	JobFailed
)

// Observation is what Decide reads.
type Observation struct {
	// Release is spec.openStackRelease.
	Release string
	// ImageTag is spec.image.tag; empty when the image is pinned by digest.
	ImageTag string
	// Installed, Target and Phase are the persisted status.
	Installed string
	Target    string
	Phase     v1alpha1.UpgradePhase
	// Jobs is the state of each schema Job with the current template.
	Jobs map[JobKind]JobState
}

// Event is an event to emit on the Glance.
type Event struct {
	Type, Reason, Message string
}

// Decision is what the Database step does next.
type Decision struct {
	// Ready, Reason and Message are the DatabaseReady condition.
	Ready   bool
	Reason  string
	Message string
	// Run is the Job to ensure (create, or re-create when its template
	// changed); empty for none.
	Run JobKind
	// Delete are Jobs to delete (an aborted or a completed upgrade's).
	Delete []JobKind
	// Failed is the Job whose failure holds the schema back, to be run again
	// after a backoff (CountFailure); empty for none.
	Failed JobKind
	// Installed, Target and Phase are the status to persist.
	Installed string
	Target    string
	Phase     v1alpha1.UpgradePhase
	// Events mark the transitions this decision makes, in order.
	Events []Event
	// Pass means the steps after Database may run (the schema serves the
	// spec's image); otherwise the pass ends here.
	Pass bool
	// Invalid means the spec is refused: the step returns an error so the
	// Glance backs off.
	Invalid bool
}

// Decide returns the next action for the schema.
func Decide(o Observation) Decision {
	d := Decision{Installed: o.Installed, Target: o.Target, Phase: o.Phase}
	switch {
	case o.Phase != "":
		return inFlight(o, d)
	case o.Installed == "" || o.Installed == o.Release:
		return sync(o, d)
	default:
		return start(o, d)
	}
}

// sync runs db-sync for a fresh install or a change within the installed
// release (a new image, config or credentials).
func sync(o Observation, d Decision) Decision {
	d.Run, d.Pass = Sync, false
	switch o.Jobs[Sync] {
	case JobSucceeded:
		d.Ready, d.Pass, d.Run = true, true, ""
		d.Installed = o.Release
		d.Reason, d.Message = v1alpha1.ReasonDatabaseSynced, fmt.Sprintf("the schema is at %s", o.Release)
	case JobFailed:
		d.Run, d.Failed = "", Sync
		d.Reason, d.Message = v1alpha1.ReasonDBSyncFailed, "the db-sync Job failed"
	default:
		d.Reason, d.Message = v1alpha1.ReasonDBSyncInProgress, "the db-sync Job is running"
	}
	return d
}

// start validates a release transition and begins Expanding.
func start(o Observation, d Decision) Decision {
	installed, err := release.Parse(o.Installed)
	if err != nil {
		return invalid(d, v1alpha1.ReasonVersionParseError, fmt.Sprintf("status.installedRelease: %v", err))
	}
	target, err := release.Parse(o.Release)
	if err != nil {
		return invalid(d, v1alpha1.ReasonVersionParseError, fmt.Sprintf("spec.openStackRelease: %v", err))
	}
	switch release.StepBetween(installed, target) {
	case release.Downgrade:
		return invalid(d, v1alpha1.ReasonDowngradeNotSupported, fmt.Sprintf("%s is older than the installed %s: downgrades are not supported", target, installed))
	case release.Skip:
		return invalid(d, v1alpha1.ReasonUpgradePathInvalid, fmt.Sprintf("%s skips releases after the installed %s: upgrade one release at a time, next to %s", target, installed, installed.Next()))
	}
	if msg := imageMismatch(o.ImageTag, target); msg != "" {
		d.Reason, d.Message = v1alpha1.ReasonImageReleaseMismatch, msg
		return d
	}
	d.Events = append(d.Events, Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventUpgradeInitiated, Message: fmt.Sprintf("upgrading from %s to %s", installed, target)})
	o.Target, o.Phase = o.Release, v1alpha1.UpgradePhaseExpanding
	d.Target, d.Phase = o.Target, o.Phase
	return inFlight(o, d)
}

func imageMismatch(tag string, target release.Release) string {
	built, ok := release.FromImageTag(tag)
	if !ok || built == target {
		return ""
	}
	return fmt.Sprintf("spec.image.tag %q is built for %s, not %s: no upgrade Job runs until the image and the release agree", tag, built, target)
}

func invalid(d Decision, reason, msg string) Decision {
	d.Reason, d.Message, d.Invalid = reason, msg, true
	d.Events = append(d.Events, Event{Type: corev1.EventTypeWarning, Reason: reason, Message: msg})
	return d
}

// inFlight walks an upgrade that has started.
func inFlight(o Observation, d Decision) Decision {
	switch {
	case o.Release == o.Target:
	case o.Release == o.Installed && o.Phase != v1alpha1.UpgradePhaseContracting:
		// A running schema Job is never stopped: MySQL DDL is not
		// transactional. The abort waits for it, then removes the Jobs.
		for _, kind := range PhaseJobs {
			if o.Jobs[kind] == JobRunning {
				d.Reason = v1alpha1.ReasonDBSyncInProgress
				if ph, ok := phases[o.Phase]; ok {
					d.Reason = ph.running
				}
				d.Message = fmt.Sprintf("aborting the upgrade to %s: waiting for the running %s Job to finish; it is never stopped mid-run", o.Target, kind)
				return d
			}
		}
		d.Target, d.Phase, d.Run, d.Delete, d.Pass = "", "", "", PhaseJobs, false
		d.Reason, d.Message = v1alpha1.ReasonDBSyncInProgress, fmt.Sprintf("the upgrade to %s was aborted; %s stays installed", o.Target, o.Installed)
		d.Events = append(d.Events, Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventUpgradeAborted, Message: fmt.Sprintf("upgrade to %s aborted in phase %s; back to %s", o.Target, o.Phase, o.Installed)})
		return d
	default:
		d.Reason = v1alpha1.ReasonUpgradeTargetChanged
		d.Message = fmt.Sprintf("an upgrade from %s to %s is in flight (phase %s): set spec.openStackRelease back to %s to finish it", o.Installed, o.Target, o.Phase, o.Target)
		if o.Phase != v1alpha1.UpgradePhaseContracting {
			d.Message += fmt.Sprintf(", or to %s to abort it", o.Installed)
		}
		return d
	}

	for {
		ph, ok := phases[o.Phase]
		if !ok {
			if o.Phase == v1alpha1.UpgradePhaseRollingUpdate {
				d.Phase, d.Pass = o.Phase, true
				d.Reason, d.Message = v1alpha1.ReasonUpgradeRollingUpdate, fmt.Sprintf("upgrading %s to %s: rolling the Deployment to the new image", o.Installed, o.Target)
				return d
			}
			d.Reason, d.Message, d.Invalid = v1alpha1.ReasonVersionParseError, fmt.Sprintf("unknown status.upgradePhase %q", o.Phase), true
			return d
		}
		// Contracting runs while the new pods serve; the others run before
		// the Deployment may roll.
		d.Pass = o.Phase == v1alpha1.UpgradePhaseContracting
		switch o.Jobs[ph.job] {
		case JobFailed:
			d.Failed = ph.job
			d.Reason, d.Message = ph.failed, fmt.Sprintf("upgrading %s to %s: the %s Job failed", o.Installed, o.Target, ph.job)
			if o.Phase != v1alpha1.UpgradePhaseContracting {
				d.Message += fmt.Sprintf("; set spec.openStackRelease back to %s to abort", o.Installed)
			}
			return d
		case JobSucceeded:
			d.Events = append(d.Events, Event{Type: corev1.EventTypeNormal, Reason: ph.doneEvent, Message: fmt.Sprintf(ph.doneMessage, o.Installed, o.Target)})
			if ph.next == "" {
				// The release is installed; db-sync with the new image then
				// loads the new release's metadefs (the schema is current,
				// so its sync is a no-op). The phase Jobs go: they belong
				// to this upgrade, never to the next.
				d.Delete = PhaseJobs
				d.Installed, d.Target, d.Phase = o.Target, "", ""
				o.Installed, o.Target, o.Phase = o.Target, "", ""
				return sync(o, d)
			}
			// Go on to the next phase in the same pass.
			o.Phase, d.Phase = ph.next, ph.next
		default:
			d.Run, d.Reason = ph.job, ph.running
			d.Message = fmt.Sprintf("upgrading %s to %s: the %s Job is running", o.Installed, o.Target, ph.job)
			return d
		}
	}
}

// phase is one Job-driven phase of an upgrade.
type phase struct {
	job             JobKind
	running, failed string
	next            v1alpha1.UpgradePhase // empty: the upgrade is complete
	doneEvent       string
	doneMessage     string // formatted with installed, target
}

var phases = map[v1alpha1.UpgradePhase]phase{
	v1alpha1.UpgradePhaseExpanding: {Expand, v1alpha1.ReasonExpandInProgress, v1alpha1.ReasonExpandFailed,
		v1alpha1.UpgradePhaseMigrating, v1alpha1.EventExpandComplete, "upgrading %s to %s: the schema is expanded"},
	v1alpha1.UpgradePhaseMigrating: {Migrate, v1alpha1.ReasonMigrateInProgress, v1alpha1.ReasonMigrateFailed,
		v1alpha1.UpgradePhaseRollingUpdate, v1alpha1.EventMigrateComplete, "upgrading %s to %s: the data is migrated"},
	v1alpha1.UpgradePhaseContracting: {Contract, v1alpha1.ReasonContractInProgress, v1alpha1.ReasonContractFailed,
		"", v1alpha1.EventUpgradeComplete, "upgraded from %s to %s"},
}
