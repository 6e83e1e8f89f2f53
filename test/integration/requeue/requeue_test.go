package requeue

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// The intervals of the architecture's "Requeue semantics" table.
const (
	deploymentPoll = 10 * time.Second // Deployment readiness, HTTPRoute acceptance, health-check retry
	secretsPoll    = 15 * time.Second // ESO secret gate; the GlanceBackend backstop
	databasePoll   = 30 * time.Second // MariaDB / db-sync / ready-default-backend database wait
)

var mariaDBGVK = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "MariaDB"}

type scene struct {
	*operatortest.Env
	t *testing.T
}

// newScene gives the test a namespace and a manager of its own whose health
// probes go to probeAddress.
func newScene(t *testing.T, probeAddress string) *scene {
	t.Helper()
	s := &scene{Env: operatortest.NewEnv(t, cl), t: t}
	m, err := operatortest.StartManager(cfg, operator.Options{
		WatchNamespaces: []string{s.NS}, OperatorNamespace: "glance-system", DevHealthcheckAddress: probeAddress,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stop manager: %v", err)
		}
	})
	return s
}

func brownfield(g *v1alpha1.Glance) {
	g.Spec.Database.ClusterRef = nil
	g.Spec.Database.Host = "db.example.com"
}

// defaultBackend creates a credential-ready default backend of the Glance.
func (s *scene) defaultBackend() {
	s.t.Helper()
	s.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	s.Backend("primary", true, "s3")
}

// setReady writes a Ready condition on an object of an external API, as its
// operator would.
func (s *scene) setReady(gvk schema.GroupVersionKind, name string, ready bool) {
	s.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: name}, u); err != nil {
		s.t.Fatal(err)
	}
	status, reason := "True", "Ready"
	if !ready {
		status, reason = "False", "Provisioning"
	}
	u.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": status, "reason": reason, "message": "test", "lastTransitionTime": "2026-01-01T00:00:00Z",
	}}}
	if err := cl.Status().Update(ctx, u); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scene) mariaDB(ready bool) {
	s.t.Helper()
	mdb := &unstructured.Unstructured{}
	mdb.SetGroupVersionKind(mariaDBGVK)
	mdb.SetNamespace(s.NS)
	mdb.SetName("mariadb")
	mdb.Object["spec"] = map[string]any{"replicas": int64(1)}
	s.Create(mdb)
	s.setReady(mariaDBGVK, "mariadb", ready)
}

// finishJob plays the Job controller: the Job succeeded.
func (s *scene) finishJob(name string) {
	s.t.Helper()
	ctx := context.Background()
	j := &batchv1.Job{}
	s.Eventually("Job "+name, func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: name}, j) == nil
	}, nil)
	now := metav1.Now()
	j.Status.StartTime = &now
	j.Status.Succeeded = 1
	j.Status.CompletionTime = &now
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	if err := cl.Status().Update(ctx, j); err != nil {
		s.t.Fatal(err)
	}
}

// rollOut plays the Deployment controller: every replica is available.
func (s *scene) rollOut() {
	s.t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	s.Eventually("the Deployment", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, d) == nil
	}, nil)
	n := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}},
	}
	if err := cl.Status().Update(ctx, d); err != nil {
		s.t.Fatal(err)
	}
	s.endpoints(n)
}

// endpoints plays the EndpointSlice controller for the API Service, unless
// something already does: a slice with n ready endpoints.
func (s *scene) endpoints(n int32) {
	s.t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{}
	s.Eventually("the Service", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: "glance"}, svc) == nil
	}, nil)
	var slices discoveryv1.EndpointSliceList
	if err := cl.List(ctx, &slices, client.InNamespace(s.NS), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		s.t.Fatal(err)
	}
	if len(slices.Items) > 0 {
		return
	}
	labels := maps.Clone(svc.Labels)
	labels[discoveryv1.LabelServiceName] = svc.Name
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: svc.Name + "-test", Namespace: s.NS, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(v1alpha1.APIPort))}},
	}
	for i := range n {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.0.%d", i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	if err := cl.Create(ctx, slice); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
}

// synced takes a brownfield Glance with a default backend through db-sync.
func (s *scene) synced(muts ...func(*v1alpha1.Glance)) {
	s.t.Helper()
	s.Credentials("pw")
	s.defaultBackend()
	s.Glance(append([]func(*v1alpha1.Glance){brownfield}, muts...)...)
	s.finishJob("glance-db-sync")
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
}

// expectGlance checks that the Glance, held in the state (typ, reason), asks
// to be reconciled again after want.
func (s *scene) expectGlance(typ, reason string, want time.Duration, why string) {
	s.t.Helper()
	g := &v1alpha1.Glance{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, g); err != nil {
		s.t.Fatal(err)
	}
	s.expect("glance", g, want, why, func() *metav1.Condition {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(g), g); err != nil {
			s.t.Fatal(err)
		}
		return meta.FindStatusCondition(g.Status.Conditions, typ)
	}, typ, reason)
}

func (s *scene) expectBackend(name, typ, reason string, want time.Duration, why string) {
	s.t.Helper()
	b := &v1alpha1.GlanceBackend{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, b); err != nil {
		s.t.Fatal(err)
	}
	s.expect("glancebackend", b, want, why, func() *metav1.Condition {
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
			s.t.Fatal(err)
		}
		return meta.FindStatusCondition(b.Status.Conditions, typ)
	}, typ, reason)
}

func (s *scene) expect(controller string, obj client.Object, want time.Duration, why string, cond func() *metav1.Condition, typ, reason string) {
	s.t.Helper()
	// The pass the wake-up started: it reads the object at least as new
	// as the wake-up, so nothing of an earlier state is left in its cache.
	passes := reconciles.NextPasses(s.t, cl, controller, obj)
	// A pass that started on a cache not yet holding the manager's own last
	// status write retries after a second (the Glance reconciler's
	// freshness guard) before it judges anything: measure the next one.
	for range 3 {
		if p := passes[len(passes)-1]; controller != "glance" || p.Outcome != operatortest.OutcomeRequeueAfter || p.After != staleCacheRetry {
			break
		}
		passes = reconciles.NextPasses(s.t, cl, controller, obj)
	}
	if p := passes[len(passes)-1]; p.Outcome != operatortest.OutcomeRequeueAfter || p.After != want {
		s.t.Errorf("%s/%s: the %s reconcile returned %s, want RequeueAfter %v (%s); the passes since the wake-up: %v",
			typ, reason, controller, p, want, why, passes)
	}
	// The passes measured saw the state under test: it still holds.
	if c := cond(); c == nil || c.Reason != reason {
		s.t.Errorf("the state changed while measuring: %s is now %+v, want reason %s", typ, c, reason)
	}
}

// TestRequeue holds a Glance or a GlanceBackend in each waiting state the
// "Requeue semantics" table names, wakes it, and checks that the reconcile
// the wake-up started returned RequeueAfter with the table's interval.
// staleCacheRetry is the Glance reconciler's retry of a pass that read a
// cache older than its own last write.
const staleCacheRetry = time.Second

func TestRequeue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(s *scene)
		// probe is where the health probes go; empty means a healthy API.
		probe string
	}{
		// 15s: the ESO secret gate (Secrets step).
		{"storenotready", func(s *scene) {
			s.SetStore(false, "vault sealed")
			s.Credentials("pw")
			s.Glance()
			s.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonSecretStoreNotReady)
			s.expectGlance(v1alpha1.ConditionSecretsReady, v1alpha1.ReasonSecretStoreNotReady, secretsPoll, "ESO secret-gate polling")
		}, ""},
		{"dbcredentials", func(s *scene) {
			s.Glance()
			s.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDBCredentials)
			s.expectGlance(v1alpha1.ConditionSecretsReady, v1alpha1.ReasonWaitingForDBCredentials, secretsPoll, "ESO secret-gate polling")
		}, ""},
		{"serviceusercredentials", func(s *scene) {
			s.Secret("glance-db", map[string]string{"username": "glance", "password": "pw"})
			s.Glance()
			s.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForServiceUserCredentials)
			s.expectGlance(v1alpha1.ConditionSecretsReady, v1alpha1.ReasonWaitingForServiceUserCredentials, secretsPoll, "ESO secret-gate polling")
		}, ""},
		// "the CR requeues after 15 seconds" (Conditions).
		{"targetcluster", func(s *scene) {
			s.Credentials("pw")
			s.Glance(func(g *v1alpha1.Glance) {
				g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: "region-two"}
			})
			s.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable)
			s.expectGlance(v1alpha1.ConditionSecretsReady, v1alpha1.ReasonTargetClusterUnavailable, secretsPoll, "TargetClusterUnavailable requeues after 15 seconds")
		}, ""},
		// 30s: the MariaDB, db-sync and ready-default-backend waits.
		{"mariadbnotready", func(s *scene) {
			s.Credentials("pw")
			s.defaultBackend()
			s.mariaDB(false)
			s.Glance()
			s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady)
			s.expectGlance(v1alpha1.ConditionDatabaseReady, v1alpha1.ReasonClusterNotReady, databasePoll, "MariaDB wait")
		}, ""},
		{"waitingfordatabase", func(s *scene) {
			s.Credentials("pw")
			s.defaultBackend()
			s.mariaDB(true)
			s.Glance()
			s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDatabase)
			s.expectGlance(v1alpha1.ConditionDatabaseReady, v1alpha1.ReasonWaitingForDatabase, databasePoll, "MariaDB wait (Database/User/Grant)")
		}, ""},
		{"waitingforbackends", func(s *scene) {
			s.Credentials("pw")
			s.Glance(brownfield)
			s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends)
			s.expectGlance(v1alpha1.ConditionDatabaseReady, v1alpha1.ReasonWaitingForBackends, databasePoll, "ready-default-backend database wait")
		}, ""},
		{"dbsyncinprogress", func(s *scene) {
			s.Credentials("pw")
			s.defaultBackend()
			s.Glance(brownfield)
			s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, v1alpha1.ReasonDBSyncInProgress)
			s.expectGlance(v1alpha1.ConditionDatabaseReady, v1alpha1.ReasonDBSyncInProgress, databasePoll, "db-sync wait")
		}, ""},
		// 10s: Deployment readiness, HTTPRoute acceptance, health-check retry.
		{"waitingfordeployment", func(s *scene) {
			s.synced()
			s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment)
			s.expectGlance(v1alpha1.ConditionDeploymentReady, v1alpha1.ReasonWaitingForDeployment, deploymentPoll, "Deployment readiness polling")
		}, ""},
		{"httproutenotaccepted", func(s *scene) {
			s.synced(func(g *v1alpha1.Glance) {
				g.Spec.Gateway = &v1alpha1.GatewaySpec{ParentRef: v1alpha1.GatewayParentReference{Name: "public"}, Hostname: "image.example.com"}
			})
			s.rollOut()
			s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
			// The health check passes (its recheck is not in the table), so
			// the group's shortest interval is the route's.
			s.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
			s.Condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonHTTPRouteNotAccepted)
			s.expectGlance(v1alpha1.ConditionHTTPRouteReady, v1alpha1.ReasonHTTPRouteNotAccepted, deploymentPoll, "HTTPRoute acceptance")
		}, ""},
		{"healthcheckretry", func(s *scene) {
			s.synced()
			s.rollOut()
			s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
			s.Condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionTrue, v1alpha1.ReasonHTTPRouteNotRequired)
			s.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionFalse, v1alpha1.ReasonConnectionFailed)
			s.expectGlance(v1alpha1.ConditionGlanceAPIReady, v1alpha1.ReasonConnectionFailed, deploymentPoll, "health-check retry")
		}, "127.0.0.1:1"},
		// 15s: the GlanceBackend controller's credential/projection backstop.
		{"backendwaitingforparent", func(s *scene) {
			s.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
			s.Create(fixtures.NewBackend(s.NS, "orphan", "absent", true, "s3"))
			s.BackendCondition("orphan", v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForParent)
			s.expectBackend("orphan", v1alpha1.ConditionCredentialsReady, v1alpha1.ReasonWaitingForParent, secretsPoll, "GlanceBackend backstop")
		}, ""},
		{"backendcredentials", func(s *scene) {
			s.Credentials("pw")
			s.Glance()
			s.Backend("primary", true, "missing")
			s.BackendCondition("primary", v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForCredentials)
			s.expectBackend("primary", v1alpha1.ConditionCredentialsReady, v1alpha1.ReasonWaitingForCredentials, secretsPoll, "GlanceBackend credential backstop")
		}, ""},
		{"backendprojection", func(s *scene) {
			s.Credentials("pw")
			s.Glance() // managed, no MariaDB: no Deployment ever mounts the store
			s.defaultBackend()
			s.BackendCondition("primary", v1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, v1alpha1.ReasonCredentialsAvailable)
			s.BackendCondition("primary", v1alpha1.ConditionConfigProjected, metav1.ConditionFalse, v1alpha1.ReasonWaitingForProjection)
			s.expectBackend("primary", v1alpha1.ConditionConfigProjected, v1alpha1.ReasonWaitingForProjection, secretsPoll, "GlanceBackend projection backstop")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			probe := tc.probe
			if probe == "" {
				probe = strings.TrimPrefix(healthy.URL, "http://")
			}
			tc.run(newScene(t, probe))
		})
	}
}
