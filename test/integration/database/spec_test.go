package database

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// reconcileTrace is controller-runtime's log of every reconcile in this process:
// it must take the logger before any manager logs (see RecordReconciles).
var reconcileTrace = operatortest.RecordReconciles()

// mountedChildren are the config ConfigMap and backends Secret the Deployment
// mounts.
func (s *scene) mountedChildren() (configMap, backends string) {
	s.t.Helper()
	for _, v := range s.Deployment(nil).Spec.Template.Spec.Volumes {
		switch {
		case v.Name == render.VolumeConfig && v.ConfigMap != nil:
			configMap = v.ConfigMap.Name
		case v.Name == render.VolumeBackends && v.Secret != nil:
			backends = v.Secret.SecretName
		}
	}
	return configMap, backends
}

// updateBackendSpec changes a GlanceBackend's spec, retrying on conflicts.
func (s *scene) updateBackendSpec(name string, mutate func(*v1alpha1.GlanceBackend)) {
	s.t.Helper()
	ctx := context.Background()
	for range 10 {
		b := &v1alpha1.GlanceBackend{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: name}, b); err != nil {
			s.t.Fatal(err)
		}
		mutate(b)
		err := cl.Update(ctx, b)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			s.t.Fatal(err)
		}
	}
	s.t.Fatal("too many conflicts updating the GlanceBackend")
}

// awaitNewChild waits until the component has exactly one object not in known and
// returns its name.
func (s *scene) awaitNewChild(list client.ObjectList, component string, known []string) string {
	s.t.Helper()
	var fresh, now []string
	s.Eventually("a new "+component+" object", func() bool {
		now = s.Names(list, component)
		fresh = nil
		for _, n := range now {
			if !slices.Contains(known, n) {
				fresh = append(fresh, n)
			}
		}
		return len(fresh) == 1
	}, func() string { return fmt.Sprintf("%s now %v, known %v", component, now, known) })
	return fresh[0]
}

// childrenExactly waits until the component's objects are want, and checks they
// stay so for a moment.
func (s *scene) childrenExactly(list client.ObjectList, component string, want []string, why string) {
	s.t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []string
	same := func() bool {
		got = slices.Sorted(slices.Values(s.Names(list, component)))
		return slices.Equal(got, want)
	}
	s.Eventually(fmt.Sprintf("%s objects %v (%s)", component, want, why), same, func() string { return fmt.Sprintf("got %v", got) })
	time.Sleep(500 * time.Millisecond)
	if !same() {
		s.t.Errorf("%s objects changed to %v, want %v (%s)", component, got, want, why)
	}
}

// TestHistoryKeepsThreeBesidesTheLiveOne: the backends Secret is "rolled on
// any content change, 3 historical retained", and the config ConfigMap is
// pruned the same way. While a db-sync Job runs, the Deployment keeps
// mounting the objects it was rolled out with (the live ones), and the
// running Job mounts those of the change that started it: the pruning keeps
// both, for a Job whose pod has not started, or retries, must still mount
// its volumes. Once the Deployment runs the current ones and the Job has
// finished, only the current and the three newest before it remain.
func TestHistoryKeepsThreeBesidesTheLiveOne(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	c0, b0 := s.mountedChildren()
	s.childrenExactly(&corev1.ConfigMapList{}, "config", []string{c0}, "after the install")
	s.childrenExactly(&corev1.SecretList{}, "backends", []string{b0}, "after the install")

	configs, secrets := []string{c0}, []string{b0}
	const changes = 6
	for i := 1; i <= changes; i++ {
		s.UpdateGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": fmt.Sprint(1099511627776 + i)}}
			if i == 1 {
				// A new image runs db-sync, which holds the Deployment
				// back while it runs; a config change alone runs none.
				g.Spec.Image.Tag = "2025.2-20250902"
			}
		})
		s.updateBackendSpec("primary", func(b *v1alpha1.GlanceBackend) { b.Spec.S3.Bucket = fmt.Sprintf("images-%d", i) })
		configs = append(configs, s.awaitNewChild(&corev1.ConfigMapList{}, "config", configs))
		secrets = append(secrets, s.awaitNewChild(&corev1.SecretList{}, "backends", secrets))
		// Creation timestamps have a one-second grain: the next objects
		// must be newer, not merely created later.
		time.Sleep(1100 * time.Millisecond)
	}
	// The db-sync Job the first change's image started is still running,
	// so the Deployment still mounts the install's objects.
	if c, b := s.mountedChildren(); c != c0 || b != b0 {
		t.Fatalf("the Deployment moved to %s / %s while db-sync ran; the scene needs it to stay on %s / %s", c, b, c0, b0)
	}
	if c, b := render.MountedNames(s.Job("glance-db-sync").Spec.Template.Spec); c != configs[1] || b != secrets[1] {
		t.Fatalf("the running db-sync mounts %s / %s; the scene needs the first change's %s / %s", c, b, configs[1], secrets[1])
	}
	// Kept: the current (6), the live (0), the running Job's (1) and the
	// three newest others (5, 4, 3). Deleted: 2.
	s.childrenExactly(&corev1.ConfigMapList{}, "config", []string{configs[0], configs[1], configs[3], configs[4], configs[5], configs[6]},
		"the current, the live, the running Job's and the 3 newest others")
	s.childrenExactly(&corev1.SecretList{}, "backends", []string{secrets[0], secrets[1], secrets[3], secrets[4], secrets[5], secrets[6]},
		"the current, the live, the running Job's and the 3 newest others")

	// db-sync finishes (the schema depends on none of the later config
	// changes, so it does not run again), and the Deployment rolls to the
	// current inputs: the live one is the current one.
	s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	s.Deployment(func(d *appsv1.Deployment) bool {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == render.VolumeConfig && v.ConfigMap != nil && v.ConfigMap.Name == configs[changes] {
				return true
			}
		}
		return false
	})
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	if c, b := s.mountedChildren(); c != configs[changes] || b != secrets[changes] {
		t.Fatalf("the Deployment mounts %s / %s, want the current %s / %s", c, b, configs[changes], secrets[changes])
	}
	s.childrenExactly(&corev1.ConfigMapList{}, "config", configs[3:], "the current (and live) one and the 3 newest before it")
	s.childrenExactly(&corev1.SecretList{}, "backends", secrets[3:], "the current (and live) one and the 3 newest before it")
}

// awaitQuiet waits until the Glance has had no reconcile for a second and
// returns its last one: what it asked for is the only periodic wake-up
// pending.
func (s *scene) awaitQuiet(key types.NamespacedName) operatortest.Pass {
	s.t.Helper()
	return reconcileTrace.AwaitQuiet(s.t, "glance", key, time.Second)
}

// checkWokenByEvent checks that the first reconcile after at ran before the
// requeue the last one before at asked for was due: something watched, not
// the clock, woke it.
func (s *scene) checkWokenByEvent(key types.NamespacedName, last operatortest.Pass, at time.Time) {
	s.t.Helper()
	var first *operatortest.Pass
	var all []operatortest.Pass
	for _, p := range reconcileTrace.Passes("glance", key) {
		all = append(all, p)
		if p.Started.Before(last.Started) || p.ID == last.ID {
			continue
		}
		if p.Started.Before(at) {
			s.t.Fatalf("a reconcile at %s, between the quiet one and the change: the scene is not quiet; passes %v", p.Started.Format("15:04:05.000"), all)
		}
		if first == nil {
			first = &p
		}
	}
	if first == nil {
		s.t.Fatalf("no reconcile after the change; passes %v", all)
	}
	switch last.Outcome {
	case operatortest.OutcomeDone:
		// Nothing periodic was pending at all.
	case operatortest.OutcomeRequeueAfter:
		if due := last.Ended.Add(last.After); !first.Started.Before(due) {
			s.t.Errorf("the reconcile that saw the change started at %s, when the requeue asked for at %s (after %s) was due: nothing shows a watch woke it",
				first.Started.Format("15:04:05.000"), last.Ended.Format("15:04:05.000"), last.After)
		}
	default:
		s.t.Fatalf("the quiet reconcile ended with %s: a retry with backoff was pending", last)
	}
}

// TestMariaDBOutageReflectsThroughTheWatch: "MariaDB clusters referenced by
// spec.database.clusterRef [are watched], so an upstream database outage
// reflects in DatabaseReady without waiting for a periodic requeue." The
// reconcile that reports ClusterNotReady, and the one that reports the
// recovery, both start before any requeue the Glance had asked for is due.
func TestMariaDBOutageReflectsThroughTheWatch(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)
	key := types.NamespacedName{Namespace: s.NS, Name: "glance"}

	last := s.awaitQuiet(key)
	at := time.Now()
	s.SetNotReady(render.MariaDBGVK, "mariadb", "GaleraNotReady", "Galera cluster lost quorum")
	c := s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady)
	if want := `MariaDB "mariadb" is not Ready: GaleraNotReady: Galera cluster lost quorum`; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	s.checkWokenByEvent(key, last, at)
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)

	last = s.awaitQuiet(key)
	at = time.Now()
	s.SetReady(render.MariaDBGVK, "mariadb")
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	s.checkWokenByEvent(key, last, at)
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)
}

// TestWaitingForBackendsHoldsSchemaAndDeployment: "the schema cannot be db
// sync-ed and the Deployment cannot be created until a ready default backend
// has produced a rendered config". A managed Glance past the MariaDB gate,
// whose only backend is attached but not credential-ready, waits on both
// conditions with no Job and no Deployment, and proceeds once the backend's
// credentials arrive.
func TestWaitingForBackendsHoldsSchemaAndDeployment(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	ctx := context.Background()
	s.Credentials("pw")
	s3 := s.Secret("s3", map[string]string{"access-key-id": "ak"})
	s.Backend("primary", true, "s3")
	s.MariaDB(true)
	s.Glance()
	s.provision()

	s.BackendCondition("primary", v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForCredentials)
	s.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)
	db := s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends)
	dep := s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends)
	for _, c := range []metav1.Condition{db, dep} {
		if !strings.Contains(c.Message, "no ready default backend has produced a rendered config") {
			t.Errorf("%s message %q does not say what it waits for", c.Type, c.Message)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		var jobs batchv1.JobList
		if err := cl.List(ctx, &jobs, client.InNamespace(s.NS)); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 0 {
			t.Fatalf("a schema Job %s runs without a rendered config", jobs.Items[0].Name)
		}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a Deployment exists without a rendered config (%v)", err)
		}
		if n := s.Names(&corev1.ConfigMapList{}, "config"); len(n) != 0 {
			t.Fatalf("config ConfigMaps %v without a ready default backend", n)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The credentials arrive: the backend turns ready, the config renders,
	// db-sync runs, then the Deployment is created.
	if err := cl.Get(ctx, client.ObjectKeyFromObject(s3), s3); err != nil {
		t.Fatal(err)
	}
	s3.Data["secret-access-key"] = []byte("sk")
	if err := cl.Update(ctx, s3); err != nil {
		t.Fatal(err)
	}
	s.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress)
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment exists before the schema is synced (%v)", err)
	}
	s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment)
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
}

// TestGatewayAPINotInstalled: this suite's API server has no Gateway API.
// spec.gateway then surfaces HTTPRouteReady=False/GatewayAPINotInstalled
// "instead of crashing the controller": the rest of the pipeline keeps
// reporting, and dropping spec.gateway makes the Glance Ready.
func TestGatewayAPINotInstalled(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install(func(g *v1alpha1.Glance) {
		g.Spec.Gateway = &v1alpha1.GatewaySpec{ParentRef: v1alpha1.GatewayParentReference{Name: "public"}, Hostname: "image.example.com"}
	})
	c := s.Condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonGatewayAPINotInstalled)
	if !strings.Contains(c.Message, "gateway.networking.k8s.io/v1 HTTPRoute") {
		t.Errorf("message %q does not name the missing API", c.Message)
	}
	// The other members of the parallel group still report.
	s.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
	s.Condition(v1alpha1.ConditionHPAReady, metav1.ConditionTrue, v1alpha1.ReasonHPANotRequired)
	s.Condition(v1alpha1.ConditionNetworkPolicyReady, metav1.ConditionTrue, v1alpha1.ReasonNetworkPolicyNotRequired)
	s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	r := s.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	if !strings.Contains(r.Message, v1alpha1.ConditionHTTPRouteReady) {
		t.Errorf("Ready message %q does not name HTTPRouteReady", r.Message)
	}

	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.Gateway = nil })
	s.Condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionTrue, v1alpha1.ReasonHTTPRouteNotRequired)
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)
}

// TestMigrateFailed: a failed db-migrate Job stops the upgrade with
// MigrateFailed before the rollout: the outgoing pods keep the old image,
// installedRelease stays, the message says how to abort, and the Job runs
// again when its pod template changes.
func TestMigrateFailed(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.upgrade()
	s.FinishJob("glance-db-expand", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)
	failed := s.FinishJob("glance-db-migrate", false)

	c := s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateFailed)
	if !strings.Contains(c.Message, "db-migrate Job failed") || !strings.Contains(c.Message, "set spec.openStackRelease back to 2025.2 to abort") {
		t.Errorf("MigrateFailed message %q", c.Message)
	}
	g := s.ReadGlance()
	if g.Status.UpgradePhase != v1alpha1.UpgradePhaseMigrating || g.Status.TargetRelease != "2026.1" || g.Status.InstalledRelease != "2025.2" {
		t.Errorf("status during the failed migrate: installed %q, target %q, phase %q", g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase)
	}
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	s.sameJob("glance-db-migrate", failed)
	if img := s.Deployment(nil).Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2025.2") {
		t.Errorf("the Deployment moved to %s after the migrate failed", img)
	}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-contract"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("a contract Job exists after the migrate failed (%v)", err)
	}

	// A new pod template (here: the config) runs the phase Job again.
	s.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": "1099511627777"}}
	})
	s.Eventually("a new db-migrate Job", func() bool { return s.Job("glance-db-migrate").UID != failed.UID }, nil)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)
	s.FinishJob("glance-db-migrate", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonUpgradeRollingUpdate)
}

// TestContractFailed: a failed db-contract Job, after the rollout, reports
// ContractFailed while the new pods serve; installedRelease is promoted
// "only after contract completes", which a re-run of the Job then does.
func TestContractFailed(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.upgrade()
	s.FinishJob("glance-db-expand", true)
	s.FinishJob("glance-db-migrate", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonUpgradeRollingUpdate)
	s.rollOutRelease("2026.1")
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonContractInProgress)
	failed := s.FinishJob("glance-db-contract", false)

	c := s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonContractFailed)
	if !strings.Contains(c.Message, "db-contract Job failed") {
		t.Errorf("ContractFailed message %q", c.Message)
	}
	g := s.ReadGlance()
	if g.Status.UpgradePhase != v1alpha1.UpgradePhaseContracting || g.Status.TargetRelease != "2026.1" || g.Status.InstalledRelease != "2025.2" {
		t.Errorf("status during the failed contract: installed %q, target %q, phase %q", g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase)
	}
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	// The new pods keep serving the expanded schema.
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	if img := s.Deployment(nil).Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2026.1") {
		t.Errorf("the Deployment runs %s after the contract failed", img)
	}
	s.sameJob("glance-db-contract", failed)
	if img := s.Job("glance-db-sync").Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2025.2") {
		t.Errorf("db-sync ran with %s before the contract completed", img)
	}
	// The failed contract holds back nothing that does not migrate the
	// schema: a replica change reaches the Deployment, and DeploymentReady
	// judges the Deployment as it is now.
	s.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](5)}
	})
	s.Deployment(func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 0) == 5 })
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment)
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	s.sameJob("glance-db-contract", failed)

	s.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": "1099511627777"}}
	})
	s.Eventually("a new db-contract Job", func() bool { return s.Job("glance-db-contract").UID != failed.UID }, nil)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonContractInProgress)
	s.FinishJob("glance-db-contract", true)
	s.resync("2026.1")
	if g := s.ReadGlance(); g.Status.InstalledRelease != "2026.1" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the contract completed: installed %q, phase %q", g.Status.InstalledRelease, g.Status.UpgradePhase)
	}
}
