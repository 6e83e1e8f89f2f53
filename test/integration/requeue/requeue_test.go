package requeue

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// requeueCase is a waiting state of the "Requeue semantics" table: the
// Glance, or its backend, held in the state (typ, reason) by setup.
type requeueCase struct {
	name  string
	setup func(s *operatortest.Scene)
	// backend names the GlanceBackend held in the state; empty means the
	// Glance.
	backend     string
	typ, reason string
	// want is the table's interval, why the row it comes from.
	want time.Duration
	why  string
	// probe is where the health probes go; empty means a healthy API.
	probe string
}

// expect waits in s for the case's state, wakes the object, and checks
// that the reconcile the wake-up started asks to come back after the case's
// interval.
func expect(t *testing.T, s *operatortest.Scene, tc requeueCase) {
	t.Helper()
	var obj operatortest.Conditioned = &v1alpha1.Glance{}
	controller, name := "glance", "glance"
	if tc.backend != "" {
		obj, controller, name = &v1alpha1.GlanceBackend{}, "glancebackend", tc.backend
		s.BackendCondition(name, tc.typ, metav1.ConditionFalse, tc.reason)
	} else {
		s.Condition(tc.typ, metav1.ConditionFalse, tc.reason)
	}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	// The pass the wake-up started: it reads the object at least as new
	// as the wake-up, so nothing of an earlier state is left in its cache.
	passes := reconciles.NextPasses(t, cl, controller, obj)
	// A pass that started on a cache not yet holding the manager's own last
	// status write retries after a second (the Glance reconciler's
	// freshness guard) before it judges anything: measure the next one.
	for range 3 {
		if p := passes[len(passes)-1]; controller != "glance" || p.Outcome != operatortest.OutcomeRequeueAfter || p.After != staleCacheRetry {
			break
		}
		passes = reconciles.NextPasses(t, cl, controller, obj)
	}
	if p := passes[len(passes)-1]; p.Outcome != operatortest.OutcomeRequeueAfter || p.After != tc.want {
		t.Errorf("%s/%s: the %s reconcile returned %s, want RequeueAfter %v (%s); the passes since the wake-up: %v",
			tc.typ, tc.reason, controller, p, tc.want, tc.why, passes)
	}
	// The passes measured saw the state under test: it still holds.
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(obj.GetConditions(), tc.typ); c == nil || c.Reason != tc.reason {
		t.Errorf("the state changed while measuring: %s is now %+v, want reason %s", tc.typ, c, tc.reason)
	}
}

// staleCacheRetry is the Glance reconciler's retry of a pass that read a
// cache older than its own last write.
const staleCacheRetry = time.Second

// TestRequeue holds a Glance or a GlanceBackend in each waiting state the
// "Requeue semantics" table names, wakes it, and checks that the reconcile
// the wake-up started returned RequeueAfter with the table's interval.
func TestRequeue(t *testing.T) {
	t.Parallel()
	for _, tc := range []requeueCase{
		// 15s: the ESO secret gate (Secrets step).
		{name: "storenotready", setup: func(s *operatortest.Scene) {
			s.SetStore(false, "vault sealed")
			s.Credentials("pw")
			s.Glance()
		}, typ: v1alpha1.ConditionSecretsReady, reason: v1alpha1.ReasonSecretStoreNotReady, want: secretsPoll, why: "ESO secret-gate polling"},
		{name: "dbcredentials", setup: func(s *operatortest.Scene) {
			s.Glance()
		}, typ: v1alpha1.ConditionSecretsReady, reason: v1alpha1.ReasonWaitingForDBCredentials, want: secretsPoll, why: "ESO secret-gate polling"},
		{name: "serviceusercredentials", setup: func(s *operatortest.Scene) {
			s.Secret("glance-db", map[string]string{"username": "glance", "password": "pw"})
			s.Glance()
		}, typ: v1alpha1.ConditionSecretsReady, reason: v1alpha1.ReasonWaitingForServiceUserCredentials, want: secretsPoll, why: "ESO secret-gate polling"},
		// "the CR requeues after 15 seconds" (Conditions).
		{name: "targetcluster", setup: func(s *operatortest.Scene) {
			s.Credentials("pw")
			s.Glance(func(g *v1alpha1.Glance) {
				g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: "region-two"}
			})
		}, typ: v1alpha1.ConditionSecretsReady, reason: v1alpha1.ReasonTargetClusterUnavailable, want: secretsPoll, why: "TargetClusterUnavailable requeues after 15 seconds"},
		// 30s: the MariaDB, db-sync and ready-default-backend waits.
		{name: "mariadbnotready", setup: func(s *operatortest.Scene) {
			s.Credentials("pw")
			s.DefaultBackend("primary")
			s.MariaDB(false)
			s.Glance()
		}, typ: v1alpha1.ConditionDatabaseReady, reason: v1alpha1.ReasonClusterNotReady, want: databasePoll, why: "MariaDB wait"},
		{name: "waitingfordatabase", setup: func(s *operatortest.Scene) {
			s.Credentials("pw")
			s.DefaultBackend("primary")
			s.MariaDB(true)
			s.Glance()
		}, typ: v1alpha1.ConditionDatabaseReady, reason: v1alpha1.ReasonWaitingForDatabase, want: databasePoll, why: "MariaDB wait (Database/User/Grant)"},
		{name: "waitingforbackends", setup: func(s *operatortest.Scene) {
			s.Credentials("pw")
			s.Glance(operatortest.Brownfield)
		}, typ: v1alpha1.ConditionDatabaseReady, reason: v1alpha1.ReasonWaitingForBackends, want: databasePoll, why: "ready-default-backend database wait"},
		{name: "dbsyncinprogress", setup: func(s *operatortest.Scene) {
			s.Credentials("pw")
			s.DefaultBackend("primary")
			s.Glance(operatortest.Brownfield)
		}, typ: v1alpha1.ConditionDatabaseReady, reason: v1alpha1.ReasonDBSyncInProgress, want: databasePoll, why: "db-sync wait"},
		// 10s: Deployment readiness, HTTPRoute acceptance, health-check retry.
		{name: "waitingfordeployment", setup: func(s *operatortest.Scene) {
			s.InstallBrownfield()
		}, typ: v1alpha1.ConditionDeploymentReady, reason: v1alpha1.ReasonWaitingForDeployment, want: deploymentPoll, why: "Deployment readiness polling"},
		{name: "httproutenotaccepted", setup: func(s *operatortest.Scene) {
			s.InstallBrownfield(func(g *v1alpha1.Glance) {
				g.Spec.Gateway = &v1alpha1.GatewaySpec{ParentRef: v1alpha1.GatewayParentReference{Name: "public"}, Hostname: "image.example.com"}
			})
			s.RollOut()
			s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
			// The health check passes (its recheck is not in the table), so
			// the group's shortest interval is the route's.
			s.Condition(v1alpha1.ConditionGlanceAPIReady, metav1.ConditionTrue, v1alpha1.ReasonAPIHealthy)
		}, typ: v1alpha1.ConditionHTTPRouteReady, reason: v1alpha1.ReasonHTTPRouteNotAccepted, want: deploymentPoll, why: "HTTPRoute acceptance"},
		{name: "healthcheckretry", setup: func(s *operatortest.Scene) {
			s.InstallBrownfield()
			s.RollOut()
			s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
			s.Condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionTrue, v1alpha1.ReasonHTTPRouteNotRequired)
		}, typ: v1alpha1.ConditionGlanceAPIReady, reason: v1alpha1.ReasonConnectionFailed, want: deploymentPoll, why: "health-check retry", probe: "127.0.0.1:1"},
		// 15s: the GlanceBackend controller's credential/projection backstop.
		{name: "backendwaitingforparent", setup: func(s *operatortest.Scene) {
			s.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
			s.Create(fixtures.NewBackend(s.NS, "orphan", "absent", true, "s3"))
		}, backend: "orphan", typ: v1alpha1.ConditionCredentialsReady, reason: v1alpha1.ReasonWaitingForParent, want: secretsPoll, why: "GlanceBackend backstop"},
		{name: "backendcredentials", setup: func(s *operatortest.Scene) {
			s.Credentials("pw")
			s.Glance()
			s.Backend("primary", true, "missing")
		}, backend: "primary", typ: v1alpha1.ConditionCredentialsReady, reason: v1alpha1.ReasonWaitingForCredentials, want: secretsPoll, why: "GlanceBackend credential backstop"},
		{name: "backendprojection", setup: func(s *operatortest.Scene) {
			s.Credentials("pw")
			s.Glance() // managed, no MariaDB: no Deployment ever mounts the store
			s.DefaultBackend("primary")
			s.BackendCondition("primary", v1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, v1alpha1.ReasonCredentialsAvailable)
		}, backend: "primary", typ: v1alpha1.ConditionConfigProjected, reason: v1alpha1.ReasonWaitingForProjection, want: secretsPoll, why: "GlanceBackend projection backstop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A manager of the case's own, probing where tc.probe says.
			s := operatortest.NewScene(t, cfg, cl, operator.Options{OperatorNamespace: "glance-system", DevHealthcheckAddress: tc.probe})
			tc.setup(s)
			expect(t, s, tc)
		})
	}
}
