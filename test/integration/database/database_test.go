package database

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/operatortest"
)

const (
	eventletCommand = "glance-api --config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/"
	configDirs      = "--config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/"
)

func command(c corev1.Container) string { return strings.Join(append(c.Command, c.Args...), " ") }

func TestFreshInstall(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.ready(false)
	s.Glance()
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDatabase)
	s.provision()

	j := s.Job("glance-db-sync")
	spec := j.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || command(spec.InitContainers[0]) != "glance-manage "+configDirs+" db sync" ||
		len(spec.Containers) != 1 || command(spec.Containers[0]) != "glance-manage "+configDirs+" db load_metadefs" {
		t.Errorf("db-sync Job runs %v then %v", spec.InitContainers, spec.Containers)
	}
	if j.Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("the db-sync Job has a TTL")
	}
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress)
	s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	if g := s.ReadGlance(); g.Status.InstalledRelease != "2025.2" {
		t.Errorf("installedRelease %q", g.Status.InstalledRelease)
	}
	s.syncRuns("succeeded", 1)

	d := s.Deployment(nil)
	api := d.Spec.Template.Spec.Containers[0]
	if command(api) != eventletCommand {
		t.Errorf("glance-api runs %q", command(api))
	}
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment)
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
	// Further passes see the same finished Job: it still counts once.
	s.syncRuns("succeeded", 1)

	ctx := context.Background()
	var svc corev1.Service
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, &svc); err != nil || svc.Spec.Ports[0].Port != 9292 {
		t.Errorf("Service %+v (%v)", svc.Spec.Ports, err)
	}
	var pdb policyv1.PodDisruptionBudget
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, &pdb); err != nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB %+v (%v)", pdb.Spec, err)
	}
	if g := s.ReadGlance(); g.Status.Endpoint != "http://glance."+s.NS+".svc.cluster.local:9292/" {
		t.Errorf("endpoint %q", g.Status.Endpoint)
	}
	// The backend's store is now mounted: its projection turns True.
	s.BackendCondition("primary", v1alpha1.ConditionConfigProjected, metav1.ConditionTrue, v1alpha1.ReasonConfigProjected)
	s.BackendCondition("primary", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)
}

func TestUpgradeWalksThePhases(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.upgrade()

	expand := s.Job("glance-db-expand")
	if img := expand.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2026.1") {
		t.Errorf("the expand Job runs %s, want the new image", img)
	}
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandInProgress)
	if g := s.ReadGlance(); g.Status.UpgradePhase != v1alpha1.UpgradePhaseExpanding || g.Status.TargetRelease != "2026.1" || g.Status.InstalledRelease != "2025.2" {
		t.Errorf("status %+v", g.Status)
	}
	// The outgoing pods keep the old image while the schema expands.
	if img := s.Deployment(nil).Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2025.2") {
		t.Errorf("the Deployment moved to %s during Expanding", img)
	}

	s.FinishJob("glance-db-expand", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)
	s.FinishJob("glance-db-migrate", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonUpgradeRollingUpdate)

	d := s.rollOutRelease("2026.1")
	cmd := command(d.Spec.Template.Spec.Containers[0])
	if !strings.HasPrefix(cmd, "uwsgi --http :9292 --http-auto-chunked --http-chunked-input") || !strings.Contains(cmd, "--pyargv "+configDirs) {
		t.Errorf("the 2026.1 container runs %q, want uWSGI", cmd)
	}
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonContractInProgress)
	if g := s.ReadGlance(); g.Status.UpgradePhase != v1alpha1.UpgradePhaseContracting {
		t.Errorf("phase %q after the rollout", g.Status.UpgradePhase)
	}
	s.FinishJob("glance-db-contract", true)
	s.resync("2026.1")
	g := s.ReadGlance()
	if g.Status.InstalledRelease != "2026.1" || g.Status.TargetRelease != "" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the upgrade %+v", g.Status)
	}
	s.events("UpgradeInitiated", "ExpandComplete", "MigrateComplete", "DeploymentRolloutComplete", "UpgradeComplete")
	s.eventsOnce("UpgradeInitiated", "ExpandComplete", "MigrateComplete", "DeploymentRolloutComplete", "UpgradeComplete")
}

func TestAbortFromMigrating(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.upgrade()
	s.FinishJob("glance-db-expand", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)
	migrate := s.Job("glance-db-migrate")
	s.UpdateGlance(release("2025.2"))
	// The abort waits for the running migrate Job: it is never cut short.
	c := s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)
	s.Eventually("the abort to wait for the running migrate Job", func() bool {
		c = s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)
		return strings.Contains(c.Message, "aborting the upgrade to 2026.1")
	}, nil)
	s.sameJob("glance-db-migrate", migrate)
	s.FinishJob("glance-db-migrate", true)
	s.events("UpgradeInitiated", "ExpandComplete", "UpgradeAborted")
	s.eventsOnce("UpgradeInitiated", "ExpandComplete", "UpgradeAborted")
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	g := s.ReadGlance()
	if g.Status.InstalledRelease != "2025.2" || g.Status.TargetRelease != "" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the abort %+v", g.Status)
	}
	ctx := context.Background()
	for _, kind := range []string{"db-expand", "db-migrate"} {
		s.Eventually("Job "+kind+" deleted", func() bool {
			var j batchv1.Job
			err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-" + kind}, &j)
			return apierrors.IsNotFound(err) || j.DeletionTimestamp != nil
		}, nil)
	}
	if img := s.Deployment(nil).Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2025.2") {
		t.Errorf("the Deployment runs %s after the abort", img)
	}
}

func TestRetargetMidFlightIsBlocked(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.upgrade()
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandInProgress)
	s.UpdateGlance(release("2026.2"))
	c := s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonUpgradeTargetChanged)
	if !strings.Contains(c.Message, "set spec.openStackRelease back to 2026.1 to finish it, or to 2025.2 to abort it") {
		t.Errorf("message %q", c.Message)
	}
	if g := s.ReadGlance(); g.Status.TargetRelease != "2026.1" || g.Status.UpgradePhase != v1alpha1.UpgradePhaseExpanding {
		t.Errorf("status %+v", g.Status)
	}
}

func TestRefusedReleases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, rel, reason string
		status            func(*v1alpha1.Glance)
	}{
		{"downgrade", "2025.1", v1alpha1.ReasonDowngradeNotSupported, nil},
		{"skip", "2026.2", v1alpha1.ReasonUpgradePathInvalid, nil},
		{"unparseable installed release", "2026.1", v1alpha1.ReasonVersionParseError, func(g *v1alpha1.Glance) { g.Status.InstalledRelease = "zed" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScene(t)
			s.install()
			if tc.status != nil {
				g := s.ReadGlance()
				tc.status(g)
				// Stop the manager while the status is doctored, or the next
				// pass would put it right.
				s.Stop()
				if err := cl.Status().Update(context.Background(), g); err != nil {
					t.Fatal(err)
				}
				s.Start()
			}
			s.UpdateGlance(release(tc.rel))
			s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, tc.reason)
			s.events(tc.reason)
			var jobs batchv1.JobList
			if err := cl.List(context.Background(), &jobs, client.InNamespace(s.NS)); err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs.Items {
				if j.Name != "glance-db-sync" {
					t.Errorf("a refused release created Job %s", j.Name)
				}
			}
		})
	}
}

func TestImageReleaseMismatchRunsNoJob(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease, g.Spec.Image.Tag = "2026.1", "2025.2-20250901" })
	c := s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonImageReleaseMismatch)
	if !strings.Contains(c.Message, `"2025.2-20250901" is built for 2025.2, not 2026.1`) {
		t.Errorf("message %q", c.Message)
	}
	var j batchv1.Job
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-expand"}, &j); !apierrors.IsNotFound(err) {
		t.Errorf("an expand Job exists despite the mismatch (%v)", err)
	}
	if g := s.ReadGlance(); g.Status.UpgradePhase != "" {
		t.Errorf("phase %q", g.Status.UpgradePhase)
	}
}

func TestRestartResumesWithoutDuplicateJobs(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.upgrade()
	expand := s.Job("glance-db-expand")
	s.Stop()
	s.Start()
	// The restarted manager finds the phase in status and the Job by name.
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonExpandInProgress)
	if again := s.Job("glance-db-expand"); again.UID != expand.UID {
		t.Fatalf("the restarted manager re-created the expand Job")
	}
	s.FinishJob("glance-db-expand", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)
	var jobs batchv1.JobList
	if err := cl.List(context.Background(), &jobs, client.InNamespace(s.NS)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"glance-db-expand", "glance-db-migrate", "glance-db-sync"}) {
		t.Errorf("Jobs %v", names)
	}
}

// failedSync creates a managed Glance whose first db-sync fails, and returns
// that Job.
func (s *scene) failedSync() *batchv1.Job {
	s.t.Helper()
	s.ready(false)
	s.Glance()
	s.provision()
	return s.FinishJob("glance-db-sync", false)
}

func TestFailedSyncRerunsAfterSpecChange(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	failed := s.failedSync()
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncFailed)
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.Image.Tag = "2025.2-20250902" })
	s.Eventually("a new db-sync Job", func() bool {
		var j batchv1.Job
		err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-sync"}, &j)
		return err == nil && j.UID != failed.UID && j.DeletionTimestamp == nil
	}, nil)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress)
}

// A rotation rolls the pods once, through a digest keyed with the Glance's
// own key: the annotation is not the plain SHA-256 anyone could recompute
// from a guessed password.
func TestRotationRollsThePods(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	ctx := context.Background()
	annotations := func() map[string]string { return s.Deployment(nil).Spec.Template.Annotations }
	before := annotations()
	if before["glance.c5c3.io/authtoken-hash"] == "" || before["glance.c5c3.io/db-connection-hash"] == "" {
		t.Fatalf("pod annotations %v", before)
	}
	rotate := func(secret, key string) {
		var sec corev1.Secret
		if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: secret}, &sec); err != nil {
			t.Fatal(err)
		}
		sec.Data[key] = []byte("rotated-" + secret)
		if err := cl.Update(ctx, &sec); err != nil {
			t.Fatal(err)
		}
	}
	generation := s.Deployment(nil).Generation
	rotate("glance-service-user", "password")
	s.Eventually("a new authtoken hash", func() bool {
		a := annotations()
		return a["glance.c5c3.io/authtoken-hash"] != before["glance.c5c3.io/authtoken-hash"] &&
			a["glance.c5c3.io/db-connection-hash"] == before["glance.c5c3.io/db-connection-hash"]
	}, nil)
	s.awaitQuiet(client.ObjectKey{Namespace: s.NS, Name: "glance"})
	if got := s.Deployment(nil).Generation; got != generation+1 {
		t.Fatalf("the Deployment went from generation %d to %d on one rotation; want one roll", generation, got)
	}
	hash := annotations()["glance.c5c3.io/authtoken-hash"]
	plain := sha256.Sum256([]byte("rotated-glance-service-user"))
	mac := hmac.New(sha256.New, s.digestKey())
	mac.Write([]byte("rotated-glance-service-user"))
	if hash == hex.EncodeToString(plain[:]) || hash != hex.EncodeToString(mac.Sum(nil)) {
		t.Fatalf("authtoken hash %s: want the HMAC-SHA256 under the Glance's digest key, not the plain SHA-256", hash)
	}
	rotate("glance-db", "password")
	s.provisionUser("glance.b")
	s.Eventually("a new db-connection hash", func() bool {
		return annotations()["glance.c5c3.io/db-connection-hash"] != before["glance.c5c3.io/db-connection-hash"]
	}, nil)
}

// A database password rotation never changes the password of the user the
// pods connect as: the new password makes the other slot's user, the DSN
// names it once it is Ready (one roll), and the old user is dropped once
// the roll is over. The next rotation goes back to the first slot; one
// during the roll waits for it.
func TestDatabaseRotationAlternatesUsers(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	ctx := context.Background()
	secret := func(name string) (*corev1.Secret, bool) {
		var sec corev1.Secret
		err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: name}, &sec)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return &sec, err == nil
	}
	exists := func(gvk schema.GroupVersionKind, name string) bool {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: name}, u)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil && u.GetDeletionTimestamp() == nil
	}
	setPassword := func(pw string) {
		sec, _ := secret("glance-db")
		sec.Data["password"] = []byte(pw)
		if err := cl.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	// connection is the DSN's user, password and slot.
	connection := func() (user, password, slot string) {
		sec, _ := secret("glance-db-connection")
		u, err := url.Parse(string(sec.Data["connection"]))
		if err != nil {
			t.Fatal(err)
		}
		pw, _ := u.User.Password()
		return u.User.Username(), pw, string(sec.Data["slot"])
	}
	hash := func() string { return s.Deployment(nil).Spec.Template.Annotations[render.AnnotationDBConnectionHash] }
	// rollOut rolls the Deployment out once it runs the live DSN.
	rollOut := func() {
		t.Helper()
		sec, _ := secret("glance-db-connection")
		mac := hmac.New(sha256.New, s.digestKey())
		mac.Write(sec.Data["connection"])
		want := hex.EncodeToString(mac.Sum(nil))
		s.Deployment(func(d *appsv1.Deployment) bool {
			return d.Spec.Template.Annotations[render.AnnotationDBConnectionHash] == want
		})
		s.RollOut()
	}

	if user, pw, slot := connection(); user != "glance" || pw != "pw" || slot != "a" {
		t.Fatalf("installed DSN: user %q, slot %q, password matches %v; want glance, a, true", user, slot, pw == "pw")
	}
	if sec, ok := secret("glance-db-user-a"); !ok || string(sec.Data["username"]) != "glance" || string(sec.Data["password"]) != "pw" {
		t.Fatalf("slot a's Secret: present %v, username %q", ok, sec.Data["username"])
	}

	// Rotate: B is made with the new password; until it is Ready the DSN
	// stays A's.
	generation, before := s.Deployment(nil).Generation, hash()
	setPassword("second")
	s.Eventually("slot b's User", func() bool { return exists(render.UserGVK, "glance.b") && exists(render.GrantGVK, "glance.b") }, nil)
	if sec, ok := secret("glance-db-user-b"); !ok || string(sec.Data["username"]) != "glance.b" || string(sec.Data["password"]) != "second" {
		t.Fatalf("slot b's Secret: present %v, username %q", ok, sec.Data["username"])
	}
	if sec, _ := secret("glance-db-user-a"); string(sec.Data["password"]) != "pw" {
		t.Fatal("the rotation changed the password of the user the pods connect as")
	}
	s.Consistently("the DSN stays slot a's while b is not Ready", 3*time.Second, func() bool {
		_, _, slot := connection()
		return slot == "a" && hash() == before
	})
	s.provisionUser("glance.b")
	s.Eventually("the DSN names slot b", func() bool {
		user, pw, slot := connection()
		return user == "glance.b" && pw == "second" && slot == "b" && hash() != before
	}, nil)
	if got := s.Deployment(nil).Generation; got != generation+1 {
		t.Errorf("the Deployment went from generation %d to %d on one rotation; want one roll", generation, got)
	}
	// A stays until the roll is over.
	s.Consistently("slot a's user stays during the roll", 3*time.Second, func() bool { return exists(render.UserGVK, "glance") })
	rollOut()
	s.Eventually("slot a dropped after the roll", func() bool {
		_, ok := secret("glance-db-user-a")
		return !exists(render.UserGVK, "glance") && !exists(render.GrantGVK, "glance") && !ok
	}, nil)
	if !exists(render.DatabaseGVK, "glance") {
		t.Fatal("the rotation deleted the Database")
	}

	// The next rotation goes back to A; one more during that roll waits
	// until it is over.
	setPassword("third")
	s.provisionUser("glance")
	s.Eventually("the DSN names slot a again", func() bool {
		user, pw, slot := connection()
		return user == "glance" && pw == "third" && slot == "a"
	}, nil)
	setPassword("fourth")
	s.Consistently("a rotation during the roll waits", 3*time.Second, func() bool {
		sec, _ := secret("glance-db-user-b")
		_, _, slot := connection()
		return slot == "a" && string(sec.Data["password"]) == "second"
	})
	rollOut()
	s.Eventually("slot b made anew with the fourth password", func() bool {
		sec, ok := secret("glance-db-user-b")
		return ok && string(sec.Data["password"]) == "fourth" && exists(render.UserGVK, "glance.b")
	}, nil)
	s.provisionUser("glance.b")
	s.Eventually("the DSN names slot b with the fourth password", func() bool {
		user, pw, slot := connection()
		return user == "glance.b" && pw == "fourth" && slot == "b"
	}, nil)
	rollOut()
	s.Eventually("slot a dropped", func() bool { return !exists(render.UserGVK, "glance") }, nil)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
}

// digestKey reads the Glance's digest key from its Secret.
func (s *scene) digestKey() []byte {
	s.t.Helper()
	var sec corev1.Secret
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-digest-key"}, &sec); err != nil {
		s.t.Fatal(err)
	}
	return sec.Data["key"]
}

// A Deployment rendered with other digests, as one rendered before the keys
// (or with a key since deleted), moves to the current ones with a single
// roll: deleting the key makes a new one, and the pods roll once.
func TestNewDigestKeyRollsOnce(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	ctx := context.Background()
	old := s.Deployment(nil)
	oldKey := s.digestKey()
	var key corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-digest-key"}, &key); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, &key); err != nil {
		t.Fatal(err)
	}
	s.Eventually("a new digest key", func() bool {
		var k corev1.Secret
		return cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-digest-key"}, &k) == nil && k.UID != key.UID
	}, nil)
	if bytes.Equal(s.digestKey(), oldKey) {
		t.Fatal("the new digest key is the old one")
	}
	s.Deployment(func(d *appsv1.Deployment) bool {
		a, was := d.Spec.Template.Annotations, old.Spec.Template.Annotations
		return a["glance.c5c3.io/authtoken-hash"] != was["glance.c5c3.io/authtoken-hash"] &&
			a["glance.c5c3.io/db-connection-hash"] != was["glance.c5c3.io/db-connection-hash"]
	})
	s.awaitQuiet(client.ObjectKey{Namespace: s.NS, Name: "glance"})
	if got := s.Deployment(nil).Generation; got != old.Generation+1 {
		t.Fatalf("the Deployment went from generation %d to %d on a new key; want one roll", old.Generation, got)
	}
}

func TestDeletionRemovesTheDatabaseObjects(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	ctx := context.Background()
	g := s.ReadGlance()
	if !slices.Contains(g.Finalizers, "glance.openstack.c5c3.io/finalizer") {
		t.Fatalf("finalizers %v", g.Finalizers)
	}
	if err := cl.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	for _, gvk := range dbGVKs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		s.deleted(gvk.Kind, u)
	}
	s.deleted("the Glance", &v1alpha1.Glance{})
	s.events("FinalizingDatabase", "DatabaseFinalized")
	// The deleted Glance's series are gone: finalize drops them, and so
	// does the pass that finds the Glance gone.
	n := testutil.CollectAndCount(s.Manager.Metrics.DBSync.Total)
	for deadline := time.Now().Add(10 * time.Second); n != 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		n = testutil.CollectAndCount(s.Manager.Metrics.DBSync.Total)
	}
	if n != 0 {
		t.Errorf("%d db-sync series left 10 s after the deletion", n)
	}
}

func TestBrownfieldCreatesNoMariaDBObjects(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.ready(true)
	s.Glance(operatortest.Brownfield)
	s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	for _, gvk := range dbGVKs {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := cl.List(context.Background(), list, client.InNamespace(s.NS)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("a brownfield Glance created %d %s objects", len(list.Items), gvk.Kind)
		}
	}
}

// sameJob checks, for a while, that the Job name is still the one given
// (same UID, not being deleted): nothing cut it short.
func (s *scene) sameJob(name string, want *batchv1.Job) {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var j batchv1.Job
		err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, &j)
		if err != nil || j.UID != want.UID || j.DeletionTimestamp != nil {
			s.t.Fatalf("the running Job %s was cut short: %v (UID %s, was %s; deleting %v)", name, err, j.UID, want.UID, j.DeletionTimestamp != nil)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConfigChangeNeverKillsARunningSchemaJob: a change of the config (and
// so of every schema Job's pod template) while a Job runs leaves it to
// finish; db-sync does not run again for it, as the schema depends on the
// image, release and database only, and a phase Job that succeeded is not
// run again for the same upgrade.
func TestConfigChangeNeverKillsARunningSchemaJob(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.ready(false)
	s.Glance()
	s.provision()
	n := 0
	touch := func() {
		n++
		s.UpdateGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": fmt.Sprint(1099511627776 + n)}}
		})
	}

	sync := s.Job("glance-db-sync")
	touch()
	s.sameJob("glance-db-sync", sync)
	sync = s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	s.sameJob("glance-db-sync", sync)
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)

	s.UpdateGlance(release("2026.1"))
	expand := s.Job("glance-db-expand")
	touch()
	s.sameJob("glance-db-expand", expand)
	s.FinishJob("glance-db-expand", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonMigrateInProgress)

	migrate := s.Job("glance-db-migrate")
	touch()
	s.sameJob("glance-db-migrate", migrate)
	s.sameJob("glance-db-expand", expand) // succeeded for this upgrade: not run again
	s.FinishJob("glance-db-migrate", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonUpgradeRollingUpdate)
	s.rollOutRelease("2026.1")
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonContractInProgress)

	contract := s.Job("glance-db-contract")
	touch()
	s.sameJob("glance-db-contract", contract)
	s.FinishJob("glance-db-contract", true)
	s.resync("2026.1")
	if g := s.ReadGlance(); g.Status.InstalledRelease != "2026.1" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the upgrade %+v", g.Status)
	}
}

// A Glance from an operator that made one database user keeps it as slot
// a: its User moves to the slot's Secret, which gets the same password, and
// the pods do not roll. The Glance is paused to put its objects back as
// that operator left them.
func TestSingleUserGlanceKeepsItsUser(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	ctx := context.Background()
	before := s.Deployment(nil)
	s.SetPaused("true")
	s.Eventually("Ready says paused", func() bool {
		c := meta.FindStatusCondition(s.ReadGlance().Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonPaused
	}, nil)
	user := &unstructured.Unstructured{}
	user.SetGroupVersionKind(render.UserGVK)
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, user); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedStringMap(user.Object, map[string]string{"name": "glance-db", "key": "password"}, "spec", "passwordSecretKeyRef"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Update(ctx, user); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: "glance-db-user-a"}}); err != nil {
		t.Fatal(err)
	}
	var conn corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-db-connection"}, &conn); err != nil {
		t.Fatal(err)
	}
	delete(conn.Data, "slot")
	if err := cl.Update(ctx, &conn); err != nil {
		t.Fatal(err)
	}

	s.SetPaused("")
	s.Eventually("slot a made of the single user", func() bool {
		var sec corev1.Secret
		if cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-db-user-a"}, &sec) != nil || string(sec.Data["password"]) != "pw" {
			return false
		}
		if cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, user) != nil {
			return false
		}
		ref, _, _ := unstructured.NestedString(user.Object, "spec", "passwordSecretKeyRef", "name")
		return ref == "glance-db-user-a" && cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-db-connection"}, &conn) == nil && string(conn.Data["slot"]) == "a"
	}, nil)
	after := s.Deployment(nil)
	if after.Generation != before.Generation || after.Spec.Template.Annotations[render.AnnotationDBConnectionHash] != before.Spec.Template.Annotations[render.AnnotationDBConnectionHash] {
		t.Errorf("taking the single user as slot a rolled the pods: generation %d to %d", before.Generation, after.Generation)
	}
	if exists := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-db-user-b"}, &corev1.Secret{}); !apierrors.IsNotFound(exists) {
		t.Errorf("slot b made without a rotation: %v", exists)
	}
}

// An operator upgrade that renders the schema Jobs otherwise (an env var
// added to every container, say) runs no db-sync: the Job that synced this
// image, release and database stays done. The older operator's Job is
// played by rewriting the template hash it carries, the one thing of a
// finished Job's template that can change.
func TestOperatorUpgradeRunsNoSync(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	synced := s.Job("glance-db-sync")
	generation := s.Deployment(nil).Generation
	s.Stop()
	synced.Annotations[render.AnnotationPodTemplateHash] = "0123456789"
	if err := cl.Update(context.Background(), synced); err != nil {
		t.Fatal(err)
	}
	s.Start()
	s.UpdateGlance(func(g *v1alpha1.Glance) { metav1.SetMetaDataLabel(&g.ObjectMeta, "wake", "1") })
	s.sameJob("glance-db-sync", synced)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	if d := s.Deployment(nil); d.Generation != generation {
		t.Errorf("the Deployment went from generation %d to %d", generation, d.Generation)
	}

	// A Job from before the schema key is judged by its image.
	s.Stop()
	synced = s.Job("glance-db-sync")
	delete(synced.Annotations, render.AnnotationSchemaKey)
	if err := cl.Update(context.Background(), synced); err != nil {
		t.Fatal(err)
	}
	s.Start()
	s.UpdateGlance(func(g *v1alpha1.Glance) { metav1.SetMetaDataLabel(&g.ObjectMeta, "wake", "2") })
	s.sameJob("glance-db-sync", synced)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
}

// stuckPod plays the Job controller and the kubelet for a schema Job whose
// pod never starts: the Job started long ago, and its one pod has waited as
// long with status.
func (s *scene) stuckPod(job *batchv1.Job, status corev1.PodStatus) {
	s.t.Helper()
	ctx := context.Background()
	long := metav1.NewTime(time.Now().Add(-10 * time.Minute))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: job.Name + "-" + string(job.UID)[:5], Labels: map[string]string{batchv1.ControllerUidLabel: string(job.UID)}},
		Spec:       *job.Spec.Template.Spec.DeepCopy(),
	}
	s.Create(pod)
	status.StartTime = &long
	pod.Status = status
	if err := cl.Status().Update(ctx, pod); err != nil {
		s.t.Fatal(err)
	}
	// The Job's status wakes the Glance once its pod is there.
	job.Status.StartTime = &long
	if err := cl.Status().Update(ctx, job); err != nil {
		s.t.Fatal(err)
	}
}

// A schema Job is never given a deadline, so a long migration is never
// killed; a Job whose pod never started (here: an image it cannot pull) is
// a visible failure that says why, and a fixed image replaces it. One whose
// pod runs (the db sync init container) stays in progress however long.
func TestSchemaJobThatNeverStartsFails(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.ready(false)
	s.Glance()
	s.provision()
	stuck := s.Job("glance-db-sync")
	if stuck.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("the db-sync Job has a deadline of %ds: a long migration would be killed mid-DDL", *stuck.Spec.ActiveDeadlineSeconds)
	}
	s.stuckPod(stuck, corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
		Name: "db-sync", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}},
	}}})
	c := s.ConditionSaying(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncFailed, "never started")
	if !strings.Contains(c.Message, "ImagePullBackOff") {
		t.Errorf("DatabaseReady does not say why the pod never started: %s", c.Message)
	}
	if notes := s.warningsOf(v1alpha1.ReasonDBSyncFailed); len(notes) != 1 || !strings.Contains(notes[0], "ImagePullBackOff") {
		t.Errorf("Warnings %q, want one naming ImagePullBackOff", notes)
	}
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.Image.Tag = "2025.2-20250902" })
	s.Eventually("the stuck db-sync Job replaced", func() bool { return s.Job("glance-db-sync").UID != stuck.UID }, nil)

	running := s.Job("glance-db-sync")
	s.stuckPod(running, corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
		Name: "db-sync", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}})
	s.UpdateGlance(func(g *v1alpha1.Glance) { metav1.SetMetaDataLabel(&g.ObjectMeta, "wake", "1") })
	s.sameJob("glance-db-sync", running)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress)
}
