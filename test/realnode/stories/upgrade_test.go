package stories

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/glanceclient"
	"github.com/c5c3/glance-operator/test/realnode"
)

// upgradeToUWSGI: 2025.2 (eventlet) to 2026.1 (uWSGI), each release its
// launch mode's image, while the scene's traffic sends list, download and
// upload requests through the Service without pause. Expand, migrate,
// rollout and contract run for real against MariaDB; no request fails, and
// the story reports the requests and their p99 during the rollout.
func (s *scene) upgradeToUWSGI(t *testing.T) {
	s.upgrade(t, s.traffic(t), "2026.1", true)
}

// jumpToGlance33: from 2026.1 on trixie's Glance 30 to
// 2026.2 on sid's Glance 33, three Glance releases of code in one step of
// the operator's, under the same traffic: expand and migrate run Glance 33's
// glance-manage against the schema the outgoing Glance 30 pods serve from.
//
// Glance itself does not support that jump: once a Glance 33 pod has served
// an image, the outgoing Glance 30 pods fail its downloads ('StoreLocation'
// object has no attribute 'secretkey', then an unhandled TypeError and no
// response), whatever the operator does. The story reports those downloads
// and holds everything else: every upload and list served, the upgrade
// through all its phases, and no failure once the old pods are gone.
func (s *scene) jumpToGlance33(t *testing.T) {
	tr := s.traffic(t)
	st := s.upgrade(t, tr, sidRelease, false)
	if failed := st.Failed - st.FailedByOp["download"]; failed > 0 {
		t.Errorf("%d uploads or lists failed during the jump to Glance 33: only downloads by the outgoing pods may", failed)
	}
	after := time.Now()
	time.Sleep(10 * time.Second)
	tr.report(t, "after the jump to Glance 33", after, time.Now(), true)
}

// upgrade moves the scene's Glance to release under the traffic, and
// checks that each phase ran and that the pods run the new release's
// image; strict, no request may fail. It returns what the traffic saw.
func (s *scene) upgrade(t *testing.T, tr *traffic, release string, strict bool) glanceclient.Stats {
	t.Helper()
	g := s.waitReady(t, 0)
	from := g.Spec.OpenStackRelease
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.OpenStackRelease = release
	g.Spec.Image.Tag = release
	start := time.Now()
	if err := cl.Patch(t.Context(), g, patch); err != nil {
		t.Fatal(err)
	}
	phases := s.watchPhases(t, g.Generation, release)
	end := time.Now()
	st := tr.report(t, "upgrade "+from+" to "+release, start, end, strict)
	for _, want := range []v1alpha1.UpgradePhase{v1alpha1.UpgradePhaseExpanding, v1alpha1.UpgradePhaseRollingUpdate} {
		if !phases[want] {
			t.Errorf("the upgrade never showed phase %s (saw %v)", want, phases)
		}
	}
	d := s.deployment(t)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "glance-api" && c.Image != sceneImages.GlanceRepository+":"+release {
			t.Errorf("after the upgrade glance-api runs %s", c.Image)
		}
	}
	for _, p := range env.RunningPods(t, s.Namespace, realnode.GlanceName) {
		for _, c := range p.Status.ContainerStatuses {
			if !c.Ready {
				t.Errorf("pod %s container %s not Ready after the upgrade", p.Name, c.Name)
			}
		}
	}
	rt := s.uploadFromPod(t, "after-upgrade", s.APIURL())
	if !rt.Listed || rt.DownloadedSHA256 != rt.SHA256 {
		t.Errorf("round trip after the upgrade: %+v", rt)
	}
	return st
}

// watchPhases waits until the Glance reports release installed and Ready
// at generation, and returns the upgrade phases it saw on the way.
func (s *scene) watchPhases(t *testing.T, generation int64, release string) map[v1alpha1.UpgradePhase]bool {
	t.Helper()
	seen := map[v1alpha1.UpgradePhase]bool{}
	g := &v1alpha1.Glance{}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 8*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, keyOf(s.Namespace, realnode.GlanceName), g); err != nil {
			return false, err
		}
		if g.Status.UpgradePhase != "" {
			seen[g.Status.UpgradePhase] = true
		}
		for _, c := range g.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady {
				return c.Status == metav1.ConditionTrue && c.ObservedGeneration >= generation &&
					g.Status.InstalledRelease == release && g.Status.UpgradePhase == "", nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the upgrade to %s did not finish (installed %q, phase %q): %v\n%s", release, g.Status.InstalledRelease, g.Status.UpgradePhase, err, s.describe(context.Background(), g))
	}
	return seen
}
