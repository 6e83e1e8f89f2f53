package database

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var allConditions = fixtures.ReadyReasons

func TestReadyGlanceAndNoOpReconcile(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReady)
	g := s.ReadGlance()
	for typ, reason := range allConditions {
		found := false
		for _, c := range g.Status.Conditions {
			if c.Type == typ {
				found = true
				if c.Status != metav1.ConditionTrue || c.Reason != reason {
					t.Errorf("%s = %s/%s, want True/%s", typ, c.Status, c.Reason, reason)
				}
			}
		}
		if !found {
			t.Errorf("condition %s missing", typ)
		}
	}

	// Settle, then wake the controllers without changing anything they
	// render: a Ready Glance costs no API write.
	last := s.Manager.Writes.Load()
	s.Eventually("the operator to settle", func() bool {
		time.Sleep(2 * time.Second)
		now := s.Manager.Writes.Load()
		settled := now == last
		last = now
		return settled
	}, nil)
	before := s.Manager.Writes.Load()
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Labels = map[string]string{"touched": "yes"} })
	time.Sleep(3 * time.Second)
	if got := s.Manager.Writes.Load() - before; got != 0 {
		t.Fatalf("re-reconciling a Ready Glance issued %d API writes, want 0", got)
	}
}

func TestHPALifecycle(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	ctx := context.Background()
	s.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 6, TargetCPUUtilization: ptr.To[int32](70)}
	})
	s.rollOutChange()
	s.Condition(v1alpha1.ConditionHPAReady, metav1.ConditionTrue, v1alpha1.ReasonHPAReady)
	var hpa autoscalingv2.HorizontalPodAutoscaler
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, &hpa); err != nil || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 6 {
		t.Fatalf("HPA %+v (%v)", hpa.Spec, err)
	}
	// The HPA owns the replica count: the operator leaves it alone.
	d := s.Deployment(nil)
	d.Spec.Replicas = ptr.To[int32](5)
	if err := cl.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	s.RollOut()
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Labels = map[string]string{"nudge": "1"} })
	time.Sleep(2 * time.Second)
	if got := *s.Deployment(nil).Spec.Replicas; got != 5 {
		t.Errorf("the operator reset the HPA's replica count to %d", got)
	}
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.Autoscaling = nil })
	s.Deployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
	s.RollOut()
	s.Condition(v1alpha1.ConditionHPAReady, metav1.ConditionTrue, v1alpha1.ReasonHPANotRequired)
	s.deleted("the HPA", &autoscalingv2.HorizontalPodAutoscaler{})
}

func TestNetworkPolicyLifecycle(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	ctx := context.Background()
	source := v1alpha1.NetworkPolicySource{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "compute"}}}
	// Without spec.webDownload, web-download is offered only without a
	// NetworkPolicy: adding or removing one changes the config, and the
	// pods roll before the policy step runs.
	updateAndRollOut := func(update func(*v1alpha1.Glance)) {
		before := s.Deployment(nil).Generation
		s.UpdateGlance(update)
		s.Deployment(func(d *appsv1.Deployment) bool { return d.Generation > before })
		s.RollOut()
	}
	updateAndRollOut(func(g *v1alpha1.Glance) {
		g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Ingress: []v1alpha1.NetworkPolicySource{source}}
	})
	s.Condition(v1alpha1.ConditionNetworkPolicyReady, metav1.ConditionTrue, v1alpha1.ReasonNetworkPolicyReady)
	np := &networkingv1.NetworkPolicy{}
	peers := func() int {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, np); err != nil {
			return -1
		}
		return len(np.Spec.Ingress[0].From)
	}
	if n := peers(); n != 3 { // the source, the operator's namespace and the Glance's own pods
		t.Fatalf("ingress peers %d: %+v", n, np.Spec.Ingress)
	}
	// A second source updates the policy.
	s.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.NetworkPolicy.Ingress = append(g.Spec.NetworkPolicy.Ingress, v1alpha1.NetworkPolicySource{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nova"}}})
	})
	s.Eventually("four ingress peers", func() bool { return peers() == 4 }, nil)
	// Removing the block removes the policy.
	updateAndRollOut(func(g *v1alpha1.Glance) { g.Spec.NetworkPolicy = nil })
	s.Condition(v1alpha1.ConditionNetworkPolicyReady, metav1.ConditionTrue, v1alpha1.ReasonNetworkPolicyNotRequired)
	s.deleted("the NetworkPolicy", &networkingv1.NetworkPolicy{})
}

func TestHealthCheckReportsAnUnreachableAPI(t *testing.T) {
	t.Parallel()
	// A manager whose probes find nothing listening.
	s := newScene(t, func(o *operator.Options) { o.DevHealthcheckAddress = "127.0.0.1:1" })
	s.install()
	c := s.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonConnectionFailed)
	if !strings.Contains(c.Message, "/healthcheck refused the connection") {
		t.Errorf("message %q", c.Message)
	}
	s.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
}

// purgeRuns reads the db-purge counter of the Glance with that result.
func (s *scene) purgeRuns(result string) float64 {
	return testutil.ToFloat64(s.Manager.Metrics.DBPurge.Total.WithLabelValues("glance", s.NS, result))
}

// purgeJob plays the CronJob controller: a run it spawned, finished.
func (s *scene) purgeJob(name string, scheduled time.Time, succeeded bool) *batchv1.Job {
	s.t.Helper()
	j, done := s.startPurgeJob(name, scheduled)
	s.FinishJob(name, succeeded)
	done()
	return j
}

// startPurgeJob plays the CronJob controller starting a run; done plays it
// dropping the run from its active list once the test has finished it.
func (s *scene) startPurgeJob(name string, scheduled time.Time) (*batchv1.Job, func()) {
	s.t.Helper()
	ctx := context.Background()
	cj := &batchv1.CronJob{}
	s.Eventually("the db-purge CronJob", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance-db-purge"}, cj) == nil
	}, nil)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.NS, Labels: cj.Spec.JobTemplate.Labels,
			Annotations:     map[string]string{batchv1.CronJobScheduledTimestampAnnotation: scheduled.UTC().Format(time.RFC3339)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: ptr.To(true)}},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	s.Create(j)
	// The CronJob controller lists the run as active, then drops it: those
	// status changes are what wake the Glance.
	setActive := func(active []corev1.ObjectReference) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cj), cj); err != nil {
			s.t.Fatal(err)
		}
		cj.Status.Active = active
		if err := cl.Status().Update(ctx, cj); err != nil {
			s.t.Fatal(err)
		}
	}
	setActive([]corev1.ObjectReference{{Kind: "Job", Namespace: s.NS, Name: name, UID: j.UID}})
	return j, func() { setActive(nil) }
}

// TestPurgeRunsCountOnceInAnyOrder: a run that finishes after a newer one
// (a hand-started run overlapping a scheduled one) is counted and announced
// too, once.
func TestPurgeRunsCountOnceInAnyOrder(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	_, olderDone := s.startPurgeJob("glance-db-purge-older", at)
	s.purgeJob("glance-db-purge-newer", at.Add(time.Hour), false)
	s.Eventually("the newer failed run counted", func() bool { return s.purgeRuns("failed") == 1 }, nil)

	s.FinishJob("glance-db-purge-older", false)
	olderDone()
	s.Eventually("the older failed run counted too", func() bool { return s.purgeRuns("failed") == 2 }, nil)
	time.Sleep(time.Second)
	if s.purgeRuns("failed") != 2 || s.purgeRuns("succeeded") != 0 {
		t.Errorf("purge runs counted %v failed, %v succeeded; want 2 and 0, once per Job", s.purgeRuns("failed"), s.purgeRuns("succeeded"))
	}
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
		t.Fatal(err)
	}
	announced := map[string]int{}
	for _, e := range list.Items {
		if e.Reason == v1alpha1.ReasonDBPurgeJobFailed && e.Related != nil {
			announced[e.Related.Name]++
		}
	}
	if announced["glance-db-purge-older"] != 1 || announced["glance-db-purge-newer"] != 1 {
		t.Errorf("DBPurgeJobFailed events per run %v, want one for each", announced)
	}
	if g := s.ReadGlance(); len(g.Status.DBPurgeCountedJobs) != 2 {
		t.Errorf("status.dbPurgeCountedJobs %v, want both runs", g.Status.DBPurgeCountedJobs)
	}
}

func TestDBPurgeRuns(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)

	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	s.purgeJob("glance-db-purge-1", at, true)
	s.Eventually("one successful purge counted", func() bool { return s.purgeRuns("succeeded") == 1 }, nil)

	s.purgeJob("glance-db-purge-2", at.Add(24*time.Hour), false)
	c := s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeJobFailed)
	if !strings.Contains(c.Message, "glance-db-purge-2") {
		t.Errorf("message %q", c.Message)
	}
	s.events(v1alpha1.ReasonDBPurgeJobFailed)
	s.Eventually("one failed purge counted", func() bool { return s.purgeRuns("failed") == 1 }, nil)

	// A newer success flips it back, however long the old failure stays in
	// the history.
	s.purgeJob("glance-db-purge-3", at.Add(48*time.Hour), true)
	s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeScheduled)
	s.Eventually("two successful purges counted", func() bool { return s.purgeRuns("succeeded") == 2 }, nil)
	time.Sleep(time.Second)
	if s.purgeRuns("succeeded") != 2 || s.purgeRuns("failed") != 1 {
		t.Errorf("purge runs counted %v succeeded, %v failed; want 2 and 1, once per Job", s.purgeRuns("succeeded"), s.purgeRuns("failed"))
	}

	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Suspend: ptr.To(true)} })
	s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeSuspended)
	var cj batchv1.CronJob
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance-db-purge"}, &cj); err != nil || cj.Spec.Suspend == nil || !*cj.Spec.Suspend {
		t.Errorf("CronJob suspend %v (%v)", cj.Spec.Suspend, err)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %s", cj.Spec.ConcurrencyPolicy)
	}
}

// TestSuspendedPurgeAfterAFailure: a pause is a posture, not a failure, even
// when the newest run failed before it.
func TestSuspendedPurgeAfterAFailure(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install()
	s.purgeJob("glance-db-purge-1", time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC), false)
	s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeJobFailed)

	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.DBPurge = &v1alpha1.DBPurgeSpec{Suspend: ptr.To(true)} })
	s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionTrue, v1alpha1.ReasonDBPurgeSuspended)
}

// TestNetworkPolicyKeepsTheMountedStores: when no backend is credential-
// ready for a while (an External Secrets re-sync), the Deployment keeps its
// last good backends Secret, and the NetworkPolicy keeps the S3 egress those
// stores need.
func TestNetworkPolicyKeepsTheMountedStores(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.install(func(g *v1alpha1.Glance) {
		g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Ingress: []v1alpha1.NetworkPolicySource{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "compute"}},
		}}}
	})
	ctx := context.Background()
	s3Egress := func() bool {
		np := &networkingv1.NetworkPolicy{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, np); err != nil {
			return false
		}
		for _, rule := range np.Spec.Egress {
			for _, port := range rule.Ports {
				if port.Port != nil && port.Port.IntVal == 9000 {
					return true
				}
			}
		}
		return false
	}
	s.Eventually("S3 egress on 9000", s3Egress, nil)

	if err := cl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: "s3"}}); err != nil {
		t.Fatal(err)
	}
	s.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)
	// Passes after the invalid projection still admit the mounted store.
	s.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.Region = "RegionTwo" })
	s.Condition(v1alpha1.ConditionNetworkPolicyReady, metav1.ConditionTrue, v1alpha1.ReasonNetworkPolicyReady)
	if !s3Egress() {
		t.Error("the NetworkPolicy lost the S3 egress of the store the pods still mount")
	}
}

// TestWaitingForBackendsReachesDeploymentReady: with no backend, the pass
// ends at the Database step, and DeploymentReady still says what it waits
// for instead of being absent.
func TestWaitingForBackendsReachesDeploymentReady(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.Credentials("pw")
	s.Glance(operatortest.Brownfield)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends)
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends)
}

// TestClusterDomain: a manager told another cluster DNS domain probes and
// publishes the Service's name in it.
func TestClusterDomain(t *testing.T) {
	t.Parallel()
	s := newScene(t, func(o *operator.Options) { o.ClusterDomain = "region-two.internal" })
	s.install()
	name := "glance." + s.NS + ".svc.region-two.internal:9292"
	c := s.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
	if !strings.Contains(c.Message, "http://"+name+"/healthcheck") {
		t.Errorf("GlanceAPIReady %q does not name the probe in the cluster domain", c.Message)
	}
	if got := s.ReadGlance().Status.Endpoint; got != "http://"+name+"/" {
		t.Errorf("status.endpoint = %q, want http://%s/", got, name)
	}
}
