package e2e

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// Upgrading 2025.2 → 2026.1 end to end: expand, migrate, the rolling update
// to the uWSGI pods, contract, and db-sync on the new image, every phase Job
// run to completion by kwok.
func TestUpgrade(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-upgrade")
	s.install()
	history := s.recordCondition(v1alpha1.ConditionDatabaseReady)
	s.update(release("2026.1"))

	s.events("UpgradeInitiated", "ExpandComplete", "MigrateComplete", "DeploymentRolloutComplete", "UpgradeComplete")
	g := s.ready()
	if g.Status.InstalledRelease != "2026.1" || g.Status.TargetRelease != "" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the upgrade: installed %q, target %q, phase %q", g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase)
	}
	phases := []string{
		v1alpha1.ReasonExpandInProgress, v1alpha1.ReasonMigrateInProgress, v1alpha1.ReasonUpgradeRollingUpdate,
		v1alpha1.ReasonContractInProgress, v1alpha1.ReasonDatabaseSynced,
	}
	if seen := history.seen(); !inOrder(seen, phases) {
		t.Errorf("DatabaseReady went through %v, want %v in this order", seen, phases)
	}
	j := s.jobCondition("glance-db-sync", batchv1.JobComplete)
	if img := j.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2026.1") {
		t.Errorf("Job glance-db-sync ran %s, want the 2026.1 image", img)
	}
	// The phase Jobs belonged to this upgrade and are gone with it.
	for _, name := range []string{"glance-db-expand", "glance-db-migrate", "glance-db-contract"} {
		s.gone("the phase Job "+name, name, &batchv1.Job{})
	}
	s.checkStateMetrics("2026.1", "", "", "uwsgi")
	if cmd := command(apiContainer(t, s.deployment())); !strings.HasPrefix(cmd, uwsgiPrefix) {
		t.Errorf("glance-api runs %q after the upgrade, want uWSGI", cmd)
	}
	s.podsRunning(2)
	if _, images := s.apiPods(); !allHaveSuffix(images, ":2026.1") {
		t.Errorf("glance-api pods run %v after the upgrade", images)
	}
	var cj batchv1.CronJob
	if s.get("glance-db-purge", &cj); !strings.HasSuffix(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, ":2026.1") {
		t.Errorf("the db-purge CronJob still runs %s", cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)
	}
}

// An expand Job that fails (the suite's kwok stage fails its pods) stops the
// upgrade with ExpandFailed while the 2025.2 pods keep serving; setting the
// release back to 2025.2 aborts it, and the Glance is Ready again.
func TestExpandFailureAndAbort(t *testing.T) {
	t.Parallel()
	s := newScene(t, expandFailsNamespace)
	s.install()
	s.update(release("2026.1"))

	c := s.condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandFailed)
	if !strings.Contains(c.Message, "set spec.openStackRelease back to 2025.2 to abort") {
		t.Errorf("ExpandFailed message %q does not say how to abort", c.Message)
	}
	expand := s.jobCondition("glance-db-expand", batchv1.JobFailed)
	if expand.Status.Failed < 1 {
		t.Errorf("the expand Job failed with %d failed pods", expand.Status.Failed)
	}
	g := s.glanceObj()
	if g.Status.UpgradePhase != v1alpha1.UpgradePhaseExpanding || g.Status.TargetRelease != "2026.1" || g.Status.InstalledRelease != "2025.2" {
		t.Errorf("status during the failed expand: installed %q, target %q, phase %q", g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase)
	}
	s.condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	// The outgoing pods keep serving the old release.
	if ready, images := s.apiPods(); ready != 2 || !allHaveSuffix(images, ":2025.2") {
		t.Errorf("%d glance-api pods ready during the failed expand, running %v", ready, images)
	}
	if cmd := command(apiContainer(t, s.deployment())); cmd != eventletCommand {
		t.Errorf("the Deployment moved to %q during the failed expand", cmd)
	}

	s.update(release("2025.2"))
	s.events("UpgradeInitiated", "UpgradeAborted")
	g = s.ready()
	if g.Status.InstalledRelease != "2025.2" || g.Status.TargetRelease != "" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the abort: installed %q, target %q, phase %q", g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase)
	}
	s.gone("the expand Job", "glance-db-expand", &batchv1.Job{})
	s.podsRunning(2)
}
