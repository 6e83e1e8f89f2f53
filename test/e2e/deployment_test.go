package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// mariaDBKinds are the mariadb-operator objects a managed Glance creates.
var mariaDBKinds = []string{"Database", "User", "Grant"}

func mariaDBObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("k8s.mariadb.com/v1alpha1")
	u.SetKind(kind)
	return u
}

func apiContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == render.ContainerAPI {
			return c
		}
	}
	t.Fatalf("the Deployment has no %s container", render.ContainerAPI)
	return corev1.Container{}
}

// jobCondition waits until the Job reached the condition (kwok ran its
// pods, the Job controller judged them) and returns it.
func (s *scene) jobCondition(name string, want batchv1.JobConditionType) *batchv1.Job {
	s.t.Helper()
	j := &batchv1.Job{}
	s.eventually(fmt.Sprintf("Job %s %s", name, want), func() (bool, string) {
		if !s.get(name, j) {
			return false, "no such Job"
		}
		for _, c := range j.Status.Conditions {
			if c.Type == want && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v", j.Status)
	})
	return j
}

// A Glance on 2025.2 with one S3 store comes up on the cluster: the
// mariadb-operator objects, the db-sync Job run to completion by kwok, the
// eventlet Deployment with its pods running, the Service, the PDB and the
// purge CronJob; all nine conditions True with their exact reasons, as
// `kubectl get gl` shows.
func TestBasicDeployment(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-basic")
	g := s.install()
	if g.Status.InstalledRelease != "2025.2" {
		t.Errorf("installedRelease %q, want 2025.2", g.Status.InstalledRelease)
	}
	if want := "http://glance." + s.ns + ".svc.cluster.local:9292/"; g.Status.Endpoint != want {
		t.Errorf("endpoint %q, want %q", g.Status.Endpoint, want)
	}
	if g.Status.UpgradePhase != "" || g.Status.TargetRelease != "" {
		t.Errorf("an upgrade in flight on a fresh install: %+v", g.Status)
	}

	for _, kind := range mariaDBKinds {
		u := mariaDBObject(kind)
		if !s.get("glance", u) {
			t.Errorf("no %s glance", kind)
			continue
		}
		if ref := metav1.GetControllerOf(u); ref == nil || ref.Kind != "Glance" || ref.UID != g.UID {
			t.Errorf("%s glance is not controlled by the Glance: %v", kind, u.GetOwnerReferences())
		}
	}
	sync := s.jobCondition("glance-db-sync", batchv1.JobComplete)
	if sync.Status.Succeeded != 1 {
		t.Errorf("db-sync Job succeeded %d pods", sync.Status.Succeeded)
	}
	if got := metricValue(t, "glance_operator_db_sync_total", map[string]string{"namespace": s.ns, "result": "succeeded"}); got != 1 {
		t.Errorf("glance_operator_db_sync_total{result=succeeded} = %v, want 1", got)
	}
	if got := metricValue(t, "glance_operator_db_sync_last_success_timestamp_seconds", map[string]string{"namespace": s.ns, "glance": "glance"}); got != float64(sync.Status.CompletionTime.Unix()) {
		t.Errorf("glance_operator_db_sync_last_success_timestamp_seconds = %v, want the Job's completion %d", got, sync.Status.CompletionTime.Unix())
	}
	s.checkStateMetrics("2025.2", "", "", "eventlet")

	d := s.deployment()
	if cmd := command(apiContainer(t, d)); cmd != eventletCommand {
		t.Errorf("glance-api runs %q, want %q", cmd, eventletCommand)
	}
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 2 || d.Status.ReadyReplicas != 2 || d.Status.AvailableReplicas != 2 {
		t.Errorf("Deployment replicas %d, ready %d, available %d; want 2", got, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	}
	s.podsRunning(2)

	var svc corev1.Service
	if !s.get("glance", &svc) {
		t.Fatal("no Service glance")
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9292 {
		t.Errorf("Service ports %+v, want 9292", svc.Spec.Ports)
	}
	var pdb policyv1.PodDisruptionBudget
	if !s.get("glance", &pdb) {
		t.Fatal("no PodDisruptionBudget glance")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PDB %+v, want minAvailable 1 for 2 replicas", pdb.Spec)
	}
	// The disruption controller counts the pods kwok runs.
	s.eventually("the PDB to count 2 healthy pods", func() (bool, string) {
		s.get("glance", &pdb)
		return pdb.Status.CurrentHealthy == 2 && pdb.Status.DisruptionsAllowed == 1, fmt.Sprintf("%+v", pdb.Status)
	})
	var cj batchv1.CronJob
	if !s.get("glance-db-purge", &cj) || cj.Spec.Schedule != v1alpha1.DefaultDBPurgeSchedule {
		t.Errorf("db-purge CronJob %+v", cj.Spec)
	}
	b := &v1alpha1.GlanceBackend{}
	s.get("s3-primary", b)
	for _, typ := range []string{v1alpha1.ConditionCredentialsReady, v1alpha1.ConditionConfigProjected, v1alpha1.ConditionReady} {
		if c := findCondition(b.Status.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("GlanceBackend %s = %+v, want True", typ, c)
		}
	}

	out := kubectl(t, "get", "gl", "-n", s.ns)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "READY") ||
		!slices.Equal(strings.Fields(lines[1])[:3], []string{"glance", "True", "2025.2"}) {
		t.Errorf("kubectl get gl:\n%s", out)
	}
}

// checkStateMetrics checks the manager's state metrics of the Ready Glance:
// one condition series per exported condition (Ready and the nine it
// aggregates), each with its current status and reason, and the info series
// with the releases, phase and launch mode.
func (s *scene) checkStateMetrics(installed, target, phase, launchMode string) {
	s.t.Helper()
	g := s.glanceObj()
	for _, c := range g.Status.Conditions {
		if c.Type != v1alpha1.ConditionReady && !slices.Contains(v1alpha1.SubConditions, c.Type) {
			// Reconciling and Stalled are for kstatus; they are not exported.
			continue
		}
		series := map[string]string{"namespace": s.ns, "glance": "glance", "type": c.Type}
		if got := metricValue(s.t, "glance_operator_glance_condition", series); got != 1 {
			s.t.Errorf("glance_operator_glance_condition%v sums to %v, want one series", series, got)
		}
		series["status"], series["reason"] = string(c.Status), c.Reason
		if got := metricValue(s.t, "glance_operator_glance_condition", series); got != 1 {
			s.t.Errorf("glance_operator_glance_condition%v = %v, want 1", series, got)
		}
	}
	info := map[string]string{"namespace": s.ns, "glance": "glance", "installed_release": installed, "target_release": target, "upgrade_phase": phase, "launch_mode": launchMode}
	if got := metricValue(s.t, "glance_operator_glance_info", info); got != 1 {
		s.t.Errorf("glance_operator_glance_info%v = %v, want 1", info, got)
	}
	glance := map[string]string{"namespace": s.ns, "glance": "glance"}
	if got := metricValue(s.t, "glance_operator_glance_created_timestamp_seconds", glance); got != float64(g.CreationTimestamp.Unix()) {
		s.t.Errorf("glance_operator_glance_created_timestamp_seconds = %v, want the Glance's creation %d", got, g.CreationTimestamp.Unix())
	}
	// The sample keeps the default schedule, 0 3 * * *: a day between runs.
	if got := metricValue(s.t, "glance_operator_db_purge_interval_seconds", glance); got != 24*3600 {
		s.t.Errorf("glance_operator_db_purge_interval_seconds = %v, want 86400", got)
	}
}

func findCondition(conditions []metav1.Condition, typ string) *metav1.Condition {
	for i := range conditions {
		if conditions[i].Type == typ {
			return &conditions[i]
		}
	}
	return nil
}

// A fresh Glance on 2026.1 runs glance-api under uWSGI.
func TestUWSGIDeployment(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-uwsgi")
	g := s.install(release("2026.1"))
	if g.Status.InstalledRelease != "2026.1" {
		t.Errorf("installedRelease %q, want 2026.1", g.Status.InstalledRelease)
	}
	cmd := command(apiContainer(t, s.deployment()))
	for _, part := range []string{
		uwsgiPrefix + " ",
		" --wsgi-file " + render.WSGIFile + " ",
		" --master --lazy-apps --need-app ",
		" --processes 2 --threads 1 ",
		" --pyargv " + configDirs,
	} {
		if !strings.Contains(" "+cmd+" ", part) {
			t.Errorf("glance-api runs %q, which lacks %q", cmd, strings.TrimSpace(part))
		}
	}
	s.podsRunning(2)
	if _, images := s.apiPods(); !allHaveSuffix(images, ":2026.1") {
		t.Errorf("glance-api pods run %v", images)
	}
}

func release(rel string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease, g.Spec.Image.Tag = rel, rel }
}

func allHaveSuffix(list []string, suffix string) bool {
	for _, s := range list {
		if !strings.HasSuffix(s, suffix) {
			return false
		}
	}
	return len(list) > 0
}

// Scaling 3 → 5 → 1: kwok runs the pods the ReplicaSet asks for, and the
// PDB keeps one pod up while there are several (minAvailable 1) and lets the
// only one go (maxUnavailable 1).
func TestScaling(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-scale")
	s.install(func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = ptr.To[int32](3) })
	for _, replicas := range []int32{3, 5, 1} {
		if replicas != 3 {
			s.update(func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = ptr.To(replicas) })
			s.ready()
		}
		s.podsRunning(int(replicas))
		d := s.deployment()
		if ptr.Deref(d.Spec.Replicas, 0) != replicas || d.Status.AvailableReplicas != replicas {
			t.Errorf("Deployment %d replicas, %d available; want %d", ptr.Deref(d.Spec.Replicas, 0), d.Status.AvailableReplicas, replicas)
		}
		var pdb policyv1.PodDisruptionBudget
		s.get("glance", &pdb)
		switch {
		case replicas > 1 && (pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil):
			t.Errorf("%d replicas: PDB %+v, want minAvailable 1", replicas, pdb.Spec)
		case replicas == 1 && (pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil):
			t.Errorf("1 replica: PDB %+v, want maxUnavailable 1", pdb.Spec)
		}
		// The pass after the last pod went writes the count.
		s.conditionSaying(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady,
			fmt.Sprintf("%d/%d replicas ready", replicas, replicas))
	}
}

// Deleting a Glance: the finalizer deletes the mariadb-operator objects and
// is released; the garbage collector of kube-controller-manager removes
// everything else the Glance owned, down to the pods; what the user
// provided stays.
func TestGlanceDeletion(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-deletion")
	g := s.install()
	if !slices.Contains(g.Finalizers, "glance.openstack.c5c3.io/finalizer") {
		t.Fatalf("finalizers %v", g.Finalizers)
	}
	ctx := context.Background()
	owned := map[string]client.ObjectList{
		"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}, "Service": &corev1.ServiceList{},
		"Deployment": &appsv1.DeploymentList{}, "ReplicaSet": &appsv1.ReplicaSetList{}, "Pod": &corev1.PodList{},
		"PodDisruptionBudget": &policyv1.PodDisruptionBudgetList{}, "Job": &batchv1.JobList{}, "CronJob": &batchv1.CronJobList{},
	}
	// What the operator created carries its labels.
	children := func() []string {
		var names []string
		for kind, list := range owned {
			if err := cl.List(ctx, list, client.InNamespace(s.ns), client.MatchingLabels{render.LabelInstance: "glance"}); err != nil {
				t.Fatal(err)
			}
			items, _ := metaItems(list)
			for _, name := range items {
				names = append(names, kind+" "+name)
			}
		}
		slices.Sort(names)
		return names
	}
	before := children()
	for _, kind := range []string{"ConfigMap", "Secret", "Service", "Deployment", "ReplicaSet", "Pod", "PodDisruptionBudget", "Job", "CronJob"} {
		if !slices.ContainsFunc(before, func(n string) bool { return strings.HasPrefix(n, kind+" ") }) {
			t.Errorf("no %s of the Glance before the deletion: %v", kind, before)
		}
	}
	series := map[string]string{"namespace": s.ns}
	for _, name := range []string{"glance_operator_db_sync_total", "glance_operator_glance_info", "glance_operator_db_sync_last_success_timestamp_seconds"} {
		if metricValue(t, name, series) == 0 {
			t.Errorf("no %s series before the deletion", name)
		}
	}

	if err := cl.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	s.gone("the Glance", "glance", &v1alpha1.Glance{})
	for _, kind := range mariaDBKinds {
		s.gone(kind, "glance", mariaDBObject(kind))
	}
	s.eventually("the garbage collector to remove the Glance's children", func() (bool, string) {
		left := children()
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
	s.events("FinalizingDatabase", "DatabaseFinalized")
	for _, name := range []string{"glance-db", "glance-service-user", "s3-credentials"} {
		if !s.get(name, &corev1.Secret{}) {
			t.Errorf("the user's Secret %s was deleted", name)
		}
	}
	if !s.get("mariadb", mariaDBObject("MariaDB")) {
		t.Error("the user's MariaDB was deleted")
	}
	if !s.get("s3-primary", &v1alpha1.GlanceBackend{}) {
		t.Error("the user's GlanceBackend was deleted")
	}
	for _, name := range []string{"glance_operator_db_sync_total", "glance_operator_glance_info", "glance_operator_glance_condition", "glance_operator_db_sync_last_success_timestamp_seconds",
		"glance_operator_glance_created_timestamp_seconds", "glance_operator_db_purge_interval_seconds"} {
		if got := metricValue(t, name, series); got != 0 {
			t.Errorf("the deleted Glance still exports %s (%v)", name, got)
		}
	}
}

// metaItems returns the names of a list's items.
func metaItems(list client.ObjectList) ([]string, error) {
	var names []string
	err := meta.EachListItem(list, func(o runtime.Object) error {
		names = append(names, o.(client.Object).GetName())
		return nil
	})
	return names, err
}

// Rotating a credential at its source rolls the pods: the Secret's digest
// in the pod template changes, the Deployment controller starts a new
// ReplicaSet, kwok brings its pods up and the old ones go.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-rotation")
	s.install()
	s.podsRunning(2)
	for _, rotation := range []struct {
		secret, key, annotation string
	}{
		{"glance-service-user", "password", "glance.c5c3.io/authtoken-hash"},
		{"glance-db", "password", "glance.c5c3.io/db-connection-hash"},
	} {
		d := s.deployment()
		before := d.Spec.Template.Annotations[rotation.annotation]
		revision := d.Annotations["deployment.kubernetes.io/revision"]
		if before == "" {
			t.Fatalf("the pod template has no %s annotation: %v", rotation.annotation, d.Spec.Template.Annotations)
		}
		updateObj(s, rotation.secret, &corev1.Secret{}, func(sec *corev1.Secret) {
			sec.Data[rotation.key] = []byte("rotated/" + rotation.secret + "?")
		})
		s.eventually("a new "+rotation.annotation+" in the pod template", func() (bool, string) {
			d = s.deployment()
			return d.Spec.Template.Annotations[rotation.annotation] != before, d.Spec.Template.Annotations[rotation.annotation]
		})
		s.eventually("a new ReplicaSet revision", func() (bool, string) {
			d = s.deployment()
			return d.Annotations["deployment.kubernetes.io/revision"] != revision, d.Annotations["deployment.kubernetes.io/revision"]
		})
		s.podsRunning(2)
		s.ready()
		var pods corev1.PodList
		if err := cl.List(context.Background(), &pods, client.InNamespace(s.ns), client.MatchingLabels(render.APIPodLabels("glance"))); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue // an old pod on its way out
			}
			if got := p.Annotations[rotation.annotation]; got == before {
				t.Errorf("pod %s still carries the old %s", p.Name, rotation.annotation)
			}
		}
	}
	// The DSN carries the rotated password, percent-encoded, for the
	// second database user, which the rotation made; the first is dropped
	// once the roll is over.
	var conn corev1.Secret
	s.get("glance-db-connection", &conn)
	if dsn := string(conn.Data["connection"]); !strings.Contains(dsn, "//glance.b:rotated%2Fglance-db%3F@") || string(conn.Data["slot"]) != "b" {
		t.Errorf("the connection Secret does not carry the rotated password (percent-encoded) of database user glance.b")
	}
	for _, kind := range []string{"User", "Grant"} {
		if !s.get("glance.b", mariaDBObject(kind)) {
			t.Errorf("no %s glance.b after the rotation", kind)
		}
		s.gone(kind, "glance", mariaDBObject(kind))
	}
	s.events("DatabaseUserCreating", "DatabaseUserSwitched", "DatabaseUserDropped")
}
