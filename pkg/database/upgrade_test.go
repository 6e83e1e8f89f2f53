package database

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

func jobs(kv ...any) map[JobKind]JobState {
	m := map[JobKind]JobState{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(JobKind)] = kv[i+1].(JobState)
	}
	return m
}

func eventReasons(d Decision) []string {
	var r []string
	for _, e := range d.Events {
		r = append(r, e.Reason)
	}
	return r
}

func TestDecide(t *testing.T) {
	const (
		expanding   = v1alpha1.UpgradePhaseExpanding
		migrating   = v1alpha1.UpgradePhaseMigrating
		rolling     = v1alpha1.UpgradePhaseRollingUpdate
		contracting = v1alpha1.UpgradePhaseContracting
	)
	for _, tc := range []struct {
		name string
		obs  Observation
		want Decision // compared field by field below; Message by fragment
		msg  string
		ev   []string
	}{
		// db-sync: fresh install and changes within a release.
		{name: "fresh install starts db-sync", obs: Observation{Release: "2025.2"},
			want: Decision{Reason: v1alpha1.ReasonDBSyncInProgress, Run: Sync}},
		{name: "fresh install db-sync running", obs: Observation{Release: "2025.2", Jobs: jobs(Sync, JobRunning)},
			want: Decision{Reason: v1alpha1.ReasonDBSyncInProgress, Run: Sync}},
		{name: "fresh install synced promotes installedRelease", obs: Observation{Release: "2025.2", Jobs: jobs(Sync, JobSucceeded)},
			want: Decision{Ready: true, Pass: true, Reason: v1alpha1.ReasonDatabaseSynced, Installed: "2025.2"}},
		{name: "db-sync failed", obs: Observation{Release: "2025.2", Jobs: jobs(Sync, JobFailed)},
			want: Decision{Reason: v1alpha1.ReasonDBSyncFailed, Failed: Sync}, msg: "the db-sync Job failed"},
		{name: "patch change re-syncs", obs: Observation{Release: "2025.2", Installed: "2025.2", Jobs: jobs(Sync, JobAbsent)},
			want: Decision{Reason: v1alpha1.ReasonDBSyncInProgress, Run: Sync, Installed: "2025.2"}},
		{name: "steady state", obs: Observation{Release: "2025.2", Installed: "2025.2", Jobs: jobs(Sync, JobSucceeded)},
			want: Decision{Ready: true, Pass: true, Reason: v1alpha1.ReasonDatabaseSynced, Installed: "2025.2"}},

		// Starting an upgrade.
		{name: "next release starts Expanding", obs: Observation{Release: "2026.1", ImageTag: "2026.1", Installed: "2025.2"},
			want: Decision{Reason: v1alpha1.ReasonExpandInProgress, Run: Expand, Installed: "2025.2", Target: "2026.1", Phase: expanding},
			ev:   []string{"UpgradeInitiated"}},
		{name: "digest-pinned image starts Expanding", obs: Observation{Release: "2026.1", Installed: "2025.2"},
			want: Decision{Reason: v1alpha1.ReasonExpandInProgress, Run: Expand, Installed: "2025.2", Target: "2026.1", Phase: expanding},
			ev:   []string{"UpgradeInitiated"}},
		{name: "image for another release", obs: Observation{Release: "2026.1", ImageTag: "2025.2-20250901", Installed: "2025.2"},
			want: Decision{Reason: v1alpha1.ReasonImageReleaseMismatch, Installed: "2025.2"}, msg: `spec.image.tag "2025.2-20250901" is built for 2025.2, not 2026.1`},
		{name: "downgrade", obs: Observation{Release: "2025.1", ImageTag: "2025.1", Installed: "2025.2"},
			want: Decision{Reason: v1alpha1.ReasonDowngradeNotSupported, Installed: "2025.2", Invalid: true}, ev: []string{v1alpha1.ReasonDowngradeNotSupported}},
		{name: "skip", obs: Observation{Release: "2026.2", ImageTag: "2026.2", Installed: "2025.2"},
			want: Decision{Reason: v1alpha1.ReasonUpgradePathInvalid, Installed: "2025.2", Invalid: true}, msg: "next to 2026.1", ev: []string{v1alpha1.ReasonUpgradePathInvalid}},
		{name: "unparseable release", obs: Observation{Release: "zed", Installed: "2025.2"},
			want: Decision{Reason: v1alpha1.ReasonVersionParseError, Installed: "2025.2", Invalid: true}, msg: "spec.openStackRelease", ev: []string{v1alpha1.ReasonVersionParseError}},
		{name: "unparseable installed release", obs: Observation{Release: "2026.1", Installed: "bogus"},
			want: Decision{Reason: v1alpha1.ReasonVersionParseError, Installed: "bogus", Invalid: true}, msg: "status.installedRelease", ev: []string{v1alpha1.ReasonVersionParseError}},

		// Walking the phases.
		{name: "expand running", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: expanding, Jobs: jobs(Expand, JobRunning)},
			want: Decision{Reason: v1alpha1.ReasonExpandInProgress, Run: Expand, Installed: "2025.2", Target: "2026.1", Phase: expanding}},
		{name: "expand done moves to Migrating", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: expanding, Jobs: jobs(Expand, JobSucceeded)},
			want: Decision{Reason: v1alpha1.ReasonMigrateInProgress, Run: Migrate, Installed: "2025.2", Target: "2026.1", Phase: migrating}, ev: []string{"ExpandComplete"}},
		{name: "expand failed", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: expanding, Jobs: jobs(Expand, JobFailed)},
			want: Decision{Reason: v1alpha1.ReasonExpandFailed, Failed: Expand, Installed: "2025.2", Target: "2026.1", Phase: expanding}, msg: "back to 2025.2 to abort"},
		{name: "migrate done moves to RollingUpdate and passes", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: migrating, Jobs: jobs(Expand, JobSucceeded, Migrate, JobSucceeded)},
			want: Decision{Reason: v1alpha1.ReasonUpgradeRollingUpdate, Pass: true, Installed: "2025.2", Target: "2026.1", Phase: rolling}, ev: []string{"MigrateComplete"}},
		{name: "migrate failed", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: migrating, Jobs: jobs(Migrate, JobFailed)},
			want: Decision{Reason: v1alpha1.ReasonMigrateFailed, Failed: Migrate, Installed: "2025.2", Target: "2026.1", Phase: migrating}},
		{name: "rolling update passes without a Job", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: rolling},
			want: Decision{Reason: v1alpha1.ReasonUpgradeRollingUpdate, Pass: true, Installed: "2025.2", Target: "2026.1", Phase: rolling}},
		{name: "contract runs while the new pods serve", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: contracting},
			want: Decision{Reason: v1alpha1.ReasonContractInProgress, Run: Contract, Pass: true, Installed: "2025.2", Target: "2026.1", Phase: contracting}},
		{name: "contract done completes the upgrade and re-syncs", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: contracting, Jobs: jobs(Contract, JobSucceeded)},
			want: Decision{Reason: v1alpha1.ReasonDBSyncInProgress, Run: Sync, Installed: "2026.1", Delete: PhaseJobs}, ev: []string{"UpgradeComplete"}},
		{name: "contract done with the new db-sync already run", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: contracting, Jobs: jobs(Contract, JobSucceeded, Sync, JobSucceeded)},
			want: Decision{Ready: true, Pass: true, Reason: v1alpha1.ReasonDatabaseSynced, Installed: "2026.1", Delete: PhaseJobs}, ev: []string{"UpgradeComplete"}},
		{name: "contract failed cannot be aborted", obs: Observation{Release: "2026.1", Installed: "2025.2", Target: "2026.1", Phase: contracting, Jobs: jobs(Contract, JobFailed)},
			want: Decision{Reason: v1alpha1.ReasonContractFailed, Failed: Contract, Pass: true, Installed: "2025.2", Target: "2026.1", Phase: contracting}},
		{name: "resumed after a crash: expand and migrate already done", obs: Observation{Release: "2026.1", ImageTag: "2026.1", Installed: "2025.2", Jobs: jobs(Expand, JobSucceeded, Migrate, JobSucceeded)},
			want: Decision{Reason: v1alpha1.ReasonUpgradeRollingUpdate, Pass: true, Installed: "2025.2", Target: "2026.1", Phase: rolling},
			ev:   []string{"UpgradeInitiated", "ExpandComplete", "MigrateComplete"}},

		// Abort and retarget.
		{name: "abort while Migrating", obs: Observation{Release: "2025.2", Installed: "2025.2", Target: "2026.1", Phase: migrating},
			want: Decision{Reason: v1alpha1.ReasonDBSyncInProgress, Installed: "2025.2", Delete: PhaseJobs}, ev: []string{"UpgradeAborted"}},
		{name: "abort while RollingUpdate", obs: Observation{Release: "2025.2", Installed: "2025.2", Target: "2026.1", Phase: rolling},
			want: Decision{Reason: v1alpha1.ReasonDBSyncInProgress, Installed: "2025.2", Delete: PhaseJobs}, ev: []string{"UpgradeAborted"}},
		{name: "abort refused while Contracting", obs: Observation{Release: "2025.2", Installed: "2025.2", Target: "2026.1", Phase: contracting},
			want: Decision{Reason: v1alpha1.ReasonUpgradeTargetChanged, Installed: "2025.2", Target: "2026.1", Phase: contracting}, msg: "back to 2026.1 to finish it"},
		{name: "retarget mid-flight", obs: Observation{Release: "2026.2", Installed: "2025.2", Target: "2026.1", Phase: expanding},
			want: Decision{Reason: v1alpha1.ReasonUpgradeTargetChanged, Installed: "2025.2", Target: "2026.1", Phase: expanding}, msg: "or to 2025.2 to abort it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.obs)
			w := tc.want
			if got.Ready != w.Ready || got.Pass != w.Pass || got.Invalid != w.Invalid || got.Reason != w.Reason || got.Run != w.Run || got.Failed != w.Failed ||
				got.Installed != w.Installed || got.Target != w.Target || got.Phase != w.Phase || !slices.Equal(got.Delete, w.Delete) {
				t.Errorf("Decide = %+v\nwant       %+v", got, w)
			}
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message %q lacks %q", got.Message, tc.msg)
			}
			if !slices.Equal(eventReasons(got), tc.ev) {
				t.Errorf("events %v, want %v", eventReasons(got), tc.ev)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for failures, want := range map[int32]time.Duration{
		1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 4: 8 * time.Minute, 5: 15 * time.Minute, 6: 15 * time.Minute, 60: 15 * time.Minute,
	} {
		if got := Backoff(failures); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", failures, got, want)
		}
	}
}

func TestCountFailure(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 500, time.UTC)
	r, counted := CountFailure(nil, Sync, "a", at)
	if !counted || r.Job != "db-sync" || r.Failures != 1 || r.LastFailedJob != "a" || !r.NextAttemptTime.Time.Equal(at.Add(time.Minute).Truncate(time.Second).Add(time.Second)) {
		t.Errorf("first failure: %+v, counted %v", r, counted)
	}
	if again, counted := CountFailure(r, Sync, "a", at.Add(time.Hour)); counted || again != r {
		t.Errorf("the same run counted twice: %+v", again)
	}
	r2, counted := CountFailure(r, Sync, "b", at)
	if !counted || r2.Failures != 2 || r2.LastFailedJob != "b" || r2.NextAttemptTime.Time.Sub(at) < 2*time.Minute {
		t.Errorf("second failure: %+v", r2)
	}
	if r3, _ := CountFailure(r2, Expand, "c", at); r3.Failures != 1 || r3.Job != "db-expand" {
		t.Errorf("another Job's failure continues the count: %+v", r3)
	}
}
