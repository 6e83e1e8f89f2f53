package targetcluster

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	glancecontroller "github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// The operator's manager runs against the management cluster with a
// clusters namespace; a Glance there names the target cluster, where the
// test plays the external operators (ESO, mariadb-operator, the Job
// controller) on the target's API.

// glanceScene is one test's namespace on both clusters, a manager serving
// targets from a clusters namespace of its own, and the target registered
// in it.
type glanceScene struct {
	// Env is the namespace on the target, with a Ready ClusterSecretStore.
	*operatortest.Env
	t        *testing.T
	clusters string
	// target is the target cluster's name: the scene's own, as the
	// Glances of earlier scenes stay on the management cluster.
	target     string
	kubeconfig []byte
	// remote is the target cluster's API server.
	remote *targetServer
	mgr    *operatortest.Manager
}

func newGlanceScene(t *testing.T) *glanceScene {
	t.Helper()
	return newGlanceSceneOn(t, target)
}

// newGlanceSceneOn is newGlanceScene with the target cluster remote.
func newGlanceSceneOn(t *testing.T, remote *targetServer) *glanceScene {
	t.Helper()
	clusters := newNamespace(t, mgmtClient)
	mgr, err := operatortest.StartManager(management.Config, operator.Options{ClustersNamespace: clusters})
	if err != nil {
		t.Fatal(err)
	}
	env := operatortest.NewEnv(t, remote.client)
	t.Cleanup(func() {
		if err := mgr.Stop(); err != nil {
			t.Errorf("stop manager: %v", err)
		}
		// No namespace controller runs on the target, and the registry
		// tests' watches there see every owner-labelled child.
		for _, obj := range targetcluster.OwnedKinds() {
			if err := remote.client.DeleteAllOf(context.Background(), obj, client.InNamespace(env.NS),
				client.HasLabels{targetcluster.OwnerKindLabel}); err != nil {
				t.Errorf("clean up the target: %v", err)
			}
		}
	})
	if err := mgmtClient.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: env.NS}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := remote.user("glance-operator-" + env.NS)
	if err != nil {
		t.Fatal(err)
	}
	s := &glanceScene{Env: env, t: t, clusters: clusters, target: "region-" + env.NS, kubeconfig: kubeconfigOf(t, cfg), remote: remote, mgr: mgr}
	s.register()
	return s
}

func (s *glanceScene) register() {
	s.t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.target, Namespace: s.clusters}}
	if _, err := ctrl.CreateOrUpdate(s.t.Context(), mgmtClient, sec, func() error {
		sec.Labels = map[string]string{targetcluster.KubeconfigSecretLabel: "true"}
		sec.Data = kubeconfigData(s.kubeconfig)
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *glanceScene) deregister() {
	s.t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.target, Namespace: s.clusters}}
	if err := mgmtClient.Delete(s.t.Context(), sec); err != nil {
		s.t.Fatal(err)
	}
}

// glance creates the Glance on the management cluster, naming the target.
func (s *glanceScene) glance(muts ...func(*v1alpha1.Glance)) *v1alpha1.Glance {
	s.t.Helper()
	g := fixtures.NewGlance(s.NS, "glance", "2025.2")
	g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Kind: v1alpha1.ClusterSecretStoreKind, Name: s.Store}
	g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: s.target}
	for _, m := range muts {
		m(g)
	}
	if err := mgmtClient.Create(s.t.Context(), g); err != nil {
		s.t.Fatal(err)
	}
	return g
}

// world gives the Glance what it reads on the target (credentials, a Ready
// MariaDB, S3 credentials) and a default backend on the management cluster.
func (s *glanceScene) world() {
	s.t.Helper()
	s.Credentials("pw")
	s.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	b := fixtures.NewBackend(s.NS, "primary", "glance", true, "s3")
	if err := mgmtClient.Create(s.t.Context(), b); err != nil {
		s.t.Fatal(err)
	}
	s.MariaDB(true)
}

// ownerLabels select the Glance's children on the target.
func (s *glanceScene) ownerLabels() client.MatchingLabels {
	return client.MatchingLabels{
		targetcluster.OwnerKindLabel: "Glance", targetcluster.OwnerNameLabel: "glance", targetcluster.OwnerNamespaceLabel: s.NS,
	}
}

// provision plays the mariadb-operator on the target: the Database, User
// and Grant, carrying the owner labels, turn Ready.
func (s *glanceScene) provision() {
	s.t.Helper()
	for _, gvk := range []schema.GroupVersionKind{render.DatabaseGVK, render.UserGVK, render.GrantGVK} {
		s.Eventually(gvk.Kind+" glance on the target", func() bool {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			err := s.remote.client.Get(s.t.Context(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, u)
			_, owned := targetcluster.OwnerOf(u.GetLabels(), "Glance")
			return err == nil && owned
		}, nil)
		s.SetReady(gvk, "glance")
	}
}

// condition waits for a condition of the Glance on the management cluster.
func (s *glanceScene) condition(typ string, status metav1.ConditionStatus, reason string, timeout time.Duration) metav1.Condition {
	s.t.Helper()
	return s.waitCondition(&v1alpha1.Glance{}, "glance", typ, status, reason, timeout)
}

// waitCondition waits for a condition of the CR name on the management
// cluster, read into obj.
func (s *glanceScene) waitCondition(obj operatortest.Conditioned, name, typ string, status metav1.ConditionStatus, reason string, timeout time.Duration) metav1.Condition {
	s.t.Helper()
	var last *metav1.Condition
	operatortest.Eventually(s.t, fmt.Sprintf("%s %s=%s/%s", name, typ, status, reason), func() error {
		if err := mgmtClient.Get(s.t.Context(), client.ObjectKey{Namespace: s.NS, Name: name}, obj); err != nil {
			return err
		}
		if last = meta.FindStatusCondition(obj.GetConditions(), typ); last == nil || last.Status != status || last.Reason != reason {
			return fmt.Errorf("last %s: %+v", typ, last)
		}
		return nil
	}, operatortest.Within(timeout))
	return *last
}

// running brings the Glance up to its Deployment on the target.
func (s *glanceScene) running() *appsv1.Deployment {
	s.t.Helper()
	s.world()
	s.glance()
	s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable, 30*time.Second)
	s.provision()
	s.FinishJob("glance-db-sync", true)
	s.condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced, 30*time.Second)
	return s.Deployment(nil)
}

// childKinds are the kinds of the children a running Glance has.
var childKinds = []struct {
	kind string
	list func() client.ObjectList
}{
	{"Secret", func() client.ObjectList { return &corev1.SecretList{} }},
	{"ConfigMap", func() client.ObjectList { return &corev1.ConfigMapList{} }},
	{"Service", func() client.ObjectList { return &corev1.ServiceList{} }},
	{"Deployment", func() client.ObjectList { return &appsv1.DeploymentList{} }},
	{"Job", func() client.ObjectList { return &batchv1.JobList{} }},
	{"CronJob", func() client.ObjectList { return &batchv1.CronJobList{} }},
}

func count(t *testing.T, cl client.Client, list client.ObjectList, opts ...client.ListOption) int {
	t.Helper()
	if err := cl.List(t.Context(), list, opts...); err != nil {
		t.Fatal(err)
	}
	return meta.LenList(list)
}

func TestGlanceRegister(t *testing.T) {
	s := newGlanceScene(t)
	s.running()
	s.RollOut()
	// The parallel group, the db-purge CronJob among it, runs once the
	// Deployment has rolled out.
	s.condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady, 30*time.Second)
	s.Eventually("CronJob glance-db-purge on the target", func() bool {
		return count(t, target.client, &batchv1.CronJobList{}, client.InNamespace(s.NS), s.ownerLabels()) > 0
	}, nil)
	for _, k := range childKinds {
		if n := count(t, target.client, k.list(), client.InNamespace(s.NS), s.ownerLabels()); n == 0 {
			t.Errorf("no %s of the Glance on the target carries the owner labels", k.kind)
		}
		if n := count(t, mgmtClient, k.list(), client.InNamespace(s.NS), client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}); n != 0 {
			t.Errorf("%d %s children of the Glance on the management cluster, want none", n, k.kind)
		}
	}
	d := s.Deployment(nil)
	if len(d.OwnerReferences) != 0 {
		t.Errorf("the target's Deployment has owner references %v; they cannot point across clusters", d.OwnerReferences)
	}
	// The backend's credentials are read on the target.
	b := &v1alpha1.GlanceBackend{}
	operatortest.Eventually(t, "backend CredentialsReady", func() error {
		if err := mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: s.NS, Name: "primary"}, b); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionCredentialsReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("CredentialsReady %+v", c)
		}
		return nil
	})
}

// restoredWithin is well under the shortest requeue of a Glance waiting for
// its Deployment (10 s), so only the watch on the target restores in time.
const restoredWithin = 3 * time.Second

func TestGlanceRestore(t *testing.T) {
	s := newGlanceScene(t)
	d := s.running()
	// Let the passes the children's creation woke finish, so that what
	// follows is restored by a watch event on the target, not by them.
	time.Sleep(time.Second)

	deleteAndWaitRecreated(t, d, &appsv1.Deployment{})

	d = s.Deployment(nil)
	want := ptr.Deref(d.Spec.Replicas, 1)
	d.Spec.Replicas = ptr.To(want + 5)
	if err := target.client.Update(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "the edited replicas undone", func() error {
		got := &appsv1.Deployment{}
		if err := target.client.Get(t.Context(), client.ObjectKeyFromObject(d), got); err != nil {
			return err
		}
		if r := ptr.Deref(got.Spec.Replicas, 1); r != want {
			return fmt.Errorf("replicas %d, want %d", r, want)
		}
		return nil
	}, operatortest.Within(restoredWithin))

	svc := &corev1.Service{}
	if err := target.client.Get(t.Context(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, svc); err != nil {
		t.Fatal(err)
	}
	deleteAndWaitRecreated(t, svc, &corev1.Service{})
}

// deleteAndWaitRecreated deletes a child on the target and waits for the
// operator to create it again (a new UID) within restoredWithin.
func deleteAndWaitRecreated(t *testing.T, obj, got client.Object) {
	t.Helper()
	if err := target.client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, fmt.Sprintf("the deleted %T restored", obj), func() error {
		if err := target.client.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
			return err
		}
		if got.GetUID() == obj.GetUID() {
			return fmt.Errorf("still the deleted %T", obj)
		}
		return nil
	}, operatortest.Within(restoredWithin))
}

func TestGlanceDeregisterAndReturn(t *testing.T) {
	s := newGlanceScene(t)
	s.Credentials("pw")
	s.glance()
	s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable, 30*time.Second)

	s.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	if err := mgmtClient.Create(t.Context(), fixtures.NewBackend(s.NS, "primary", "glance", true, "s3")); err != nil {
		t.Fatal(err)
	}
	s.backendCondition(v1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, v1alpha1.ReasonCredentialsAvailable)

	s.deregister()
	// Sooner than the 15 s requeue: the target's stop wakes the Glance.
	c := s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, 10*time.Second)
	if !strings.Contains(c.Message, "not registered") {
		t.Errorf("TargetClusterUnavailable message %q does not carry the resolver's error", c.Message)
	}
	bc := s.backendCondition(v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable)
	if !strings.Contains(bc.Message, "not registered") {
		t.Errorf("the backend's TargetClusterUnavailable message %q does not carry the resolver's error", bc.Message)
	}

	s.register()
	s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable, 30*time.Second)
	s.backendCondition(v1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, v1alpha1.ReasonCredentialsAvailable)
}

// setGateway gives the Glance spec.gateway, retrying on conflicts with the
// operator's status writes.
func (s *glanceScene) setGateway() {
	s.t.Helper()
	for {
		g := &v1alpha1.Glance{}
		if err := mgmtClient.Get(s.t.Context(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, g); err != nil {
			s.t.Fatal(err)
		}
		g.Spec.Gateway = &v1alpha1.GatewaySpec{ParentRef: v1alpha1.GatewayParentReference{Name: "public"}, Hostname: "image.example.com"}
		err := mgmtClient.Update(s.t.Context(), g)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			s.t.Fatal(err)
		}
	}
}

// deleteGlance deletes the Glance and waits until it has left etcd.
func (s *glanceScene) deleteGlance() {
	s.t.Helper()
	s.requestDeletion()
	s.glanceGone(time.Minute)
}

// requestDeletion deletes the Glance and returns it as it is then.
func (s *glanceScene) requestDeletion() *v1alpha1.Glance {
	s.t.Helper()
	g := &v1alpha1.Glance{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: "glance"}}
	if err := mgmtClient.Delete(s.t.Context(), g); err != nil {
		s.t.Fatal(err)
	}
	return g
}

// glanceGone waits until the Glance has left etcd.
func (s *glanceScene) glanceGone(within time.Duration) {
	s.t.Helper()
	g := &v1alpha1.Glance{}
	operatortest.Eventually(s.t, "the Glance gone", func() error {
		err := mgmtClient.Get(s.t.Context(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, g)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v), finalizers %v", err, g.Finalizers)
	}, operatortest.Within(within))
}

// nothingLeftOnTarget checks that no child of the Glance and no MariaDB
// object is left on the target.
func (s *glanceScene) nothingLeftOnTarget() {
	s.t.Helper()
	for _, k := range childKinds {
		if n := count(s.t, s.remote.client, k.list(), client.InNamespace(s.NS), s.ownerLabels()); n != 0 {
			s.t.Errorf("%d %s of the deleted Glance left on the target", n, k.kind)
		}
	}
	for _, kind := range []string{"Database", "User", "Grant"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(render.MariaDBGVK.GroupVersion().WithKind(kind + "List"))
		if n := count(s.t, s.remote.client, list, client.InNamespace(s.NS)); n != 0 {
			s.t.Errorf("%d %s left on the target", n, kind)
		}
	}
}

// startOwnTarget starts a target cluster of the test's own, stopped when
// the test ends.
func startOwnTarget(t *testing.T, crds controlplane.CRDs) *targetServer {
	t.Helper()
	own, err := startTargetServer(crds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := own.stop(); err != nil {
			t.Errorf("stop the test's own target: %v", err)
		}
	})
	return own
}

// rolledOut brings the Glance up to a rolled-out Deployment on the target.
func (s *glanceScene) rolledOut() {
	s.t.Helper()
	s.running()
	s.RollOut()
	s.condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady, 30*time.Second)
}

// backendCondition waits for a condition of the backend primary.
func (s *glanceScene) backendCondition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	s.t.Helper()
	return s.waitCondition(&v1alpha1.GlanceBackend{}, "primary", typ, status, reason, 30*time.Second)
}

func TestGlanceDeleteWithTargetPresent(t *testing.T) {
	s := newGlanceScene(t)
	s.running()
	s.deleteGlance()
	s.nothingLeftOnTarget()
	// The user's Secrets are not the Glance's.
	if err := target.client.Get(t.Context(), client.ObjectKey{Namespace: s.NS, Name: "glance-db"}, &corev1.Secret{}); err != nil {
		t.Errorf("the user's Secret glance-db: %v", err)
	}
}

// TestGlanceAbandon: a Glance deleted after its target cluster was
// deregistered leaves etcd, and the RemoteChildrenAbandoned Warning names
// every object it left on the target as kind/namespace/name (a pattern where
// the name is content-addressed), the Secrets holding credentials by name.
func TestGlanceAbandon(t *testing.T) {
	s := newGlanceScene(t)
	s.running()
	s.condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected, 30*time.Second)
	s.deregister()
	s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, 30*time.Second)

	s.deleteGlance()
	var note string
	operatortest.Eventually(t, "a RemoteChildrenAbandoned event", func() error {
		e := s.findEvent("RemoteChildrenAbandoned")
		if e == nil || e.Type != corev1.EventTypeWarning {
			return fmt.Errorf("none: %+v", e)
		}
		note = e.Note
		return nil
	}, operatortest.Within(10*time.Second))
	for _, name := range []string{"glance-db-connection", "glance-db-user-a", "glance-digest-key"} {
		if !strings.Contains(note, "Secret/"+s.NS+"/"+name) {
			t.Errorf("the note does not name the credentials Secret %s/%s: %q", s.NS, name, note)
		}
	}

	// Left behind: what the Glance made on the target before it went,
	// every piece of it named in the note.
	var left []string
	kinds := append(slices.Clone(childKinds), struct {
		kind string
		list func() client.ObjectList
	}{"PodDisruptionBudget", func() client.ObjectList { return &policyv1.PodDisruptionBudgetList{} }})
	for _, k := range kinds {
		list := k.list()
		count(t, target.client, list, client.InNamespace(s.NS), s.ownerLabels())
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			left = append(left, k.kind+"/"+s.NS+"/"+o.(client.Object).GetName())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{render.DatabaseGVK, render.UserGVK, render.GrantGVK} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		count(t, target.client, list, client.InNamespace(s.NS), s.ownerLabels())
		for _, o := range list.Items {
			left = append(left, gvk.Kind+"."+gvk.Group+"/"+s.NS+"/"+o.GetName())
		}
	}
	if !slices.ContainsFunc(left, func(o string) bool { return strings.HasPrefix(o, "Secret/"+s.NS+"/glance-backends-") }) {
		t.Errorf("no backends Secret among what is left on the target: %v; the scene should have one", left)
	}
	named := namedIn(note)
	for _, o := range left {
		if !slices.ContainsFunc(named, func(re *regexp.Regexp) bool { return re.MatchString(o) }) {
			t.Errorf("%s is left on the target, and the note does not name it: %q", o, note)
		}
	}
}

// namedIn reads the objects a RemoteChildrenAbandoned note names, as
// patterns: a <placeholder> in a name matches any lowercase name part.
func namedIn(note string) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, m := range regexp.MustCompile(`[A-Za-z0-9.]+/[a-z0-9-]+/[a-z0-9.<>-]+`).FindAllString(note, -1) {
		re := regexp.MustCompile(`<[a-z-]+>`).ReplaceAllString(regexp.QuoteMeta(m), `[a-z0-9]+`)
		out = append(out, regexp.MustCompile("^"+re+"$"))
	}
	return out
}

// TestGlanceDeleteDuringTargetOutage: a Glance deleted while its target's API
// server is down keeps its finalizer and says why; once the target answers
// again the deletion finishes with everything on the target cleaned up.
// Only a deregistered target is abandoned (TestGlanceAbandon).
func TestGlanceDeleteDuringTargetOutage(t *testing.T) {
	own := startOwnTarget(t, controlplane.CRDs{MariaDB: true, ExternalSecrets: true})
	s := newGlanceSceneOn(t, own)
	s.rolledOut()

	if err := own.stopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := true
	t.Cleanup(func() {
		if down {
			if err := own.startAPIServer(); err != nil {
				t.Errorf("restart the target API server: %v", err)
			}
		}
	})
	g := s.requestDeletion()
	c := s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, time.Minute)
	if !strings.Contains(c.Message, "the deletion waits") || !strings.Contains(c.Message, "not reachable") {
		t.Errorf("TargetClusterUnavailable message %q does not say the deletion waits for the unreachable target", c.Message)
	}
	if err := mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(g), g); err != nil {
		t.Fatalf("the Glance left etcd during the outage: %v", err)
	}
	if !slices.Contains(g.Finalizers, glancecontroller.Finalizer) {
		t.Fatalf("finalizers %v during the outage, want the operator's kept", g.Finalizers)
	}
	if e := s.findEvent("RemoteChildrenAbandoned"); e != nil {
		t.Errorf("children abandoned during a transient outage: %q", e.Note)
	}

	if err := own.startAPIServer(); err != nil {
		t.Fatal(err)
	}
	down = false
	s.glanceGone(time.Minute)
	s.nothingLeftOnTarget()
	if e := s.findEvent("RemoteChildrenAbandoned"); e != nil {
		t.Errorf("children abandoned after a transient outage: %q", e.Note)
	}
}

// findEvent is the first event of reason on the management cluster in the
// scene's namespace, or nil.
func (s *glanceScene) findEvent(reason string) *eventsv1.Event {
	s.t.Helper()
	var events eventsv1.EventList
	if err := mgmtClient.List(s.t.Context(), &events, client.InNamespace(s.NS)); err != nil {
		s.t.Fatal(err)
	}
	for i := range events.Items {
		if events.Items[i].Reason == reason {
			return &events.Items[i]
		}
	}
	return nil
}

// TestGlanceGatewayAPIOnTheTargetOnly: the management cluster does not serve
// the Gateway API, the target does: the HTTPRoute is made on the target,
// judged by the target's own discovery.
func TestGlanceGatewayAPIOnTheTargetOnly(t *testing.T) {
	if _, err := mgmtClient.RESTMapper().RESTMapping(schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}); err == nil {
		t.Fatal("the management API server serves the Gateway API; this story needs it absent there")
	}
	s := newGlanceScene(t)
	s.rolledOut()
	s.setGateway()
	// No Gateway controller runs on the target: the route waits for
	// acceptance, which says the Gateway API was found there.
	c := s.condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonHTTPRouteNotAccepted, 30*time.Second)
	if strings.Contains(c.Message, "does not serve") {
		t.Errorf("HTTPRouteReady %q", c.Message)
	}
	s.Eventually("the HTTPRoute on the target with the owner labels", func() bool {
		return count(t, target.client, &gatewayv1.HTTPRouteList{}, client.InNamespace(s.NS), s.ownerLabels()) == 1
	}, nil)
}

// TestGlanceRefusedKubeconfig: a kubeconfig whose user runs an exec plugin
// is refused; the Glance says so, and converges once the kubeconfig is
// fixed.
func TestGlanceRefusedKubeconfig(t *testing.T) {
	s := newGlanceScene(t)
	good := s.kubeconfig
	kc := clientcmdapi.NewConfig()
	kc.Clusters["target"] = &clientcmdapi.Cluster{Server: serverOf(target.config), CertificateAuthorityData: target.config.CAData}
	kc.AuthInfos["plugin"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/true", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	kc.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: "plugin"}
	kc.CurrentContext = "target"
	exec, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	s.kubeconfig = exec
	s.register()

	s.Credentials("pw")
	s.glance()
	c := s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, 30*time.Second)
	if !strings.Contains(c.Message, "refused") || !strings.Contains(c.Message, "exec") {
		t.Errorf("TargetClusterUnavailable message %q does not say the exec kubeconfig is refused", c.Message)
	}

	s.kubeconfig = good
	s.register()
	s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable, 30*time.Second)
}

// TestGlanceCapabilityProbeFailed: on a target without the Gateway API the
// route waits for it; when the target's discovery of the Gateway API group
// fails (its APIService names no running server), the Glance cannot tell
// and says so, instead of taking the failure for an absent API.
func TestGlanceCapabilityProbeFailed(t *testing.T) {
	bare := startOwnTarget(t, controlplane.CRDs{MariaDB: true, ExternalSecrets: true})
	s := newGlanceSceneOn(t, bare)
	s.rolledOut()
	s.setGateway()
	s.condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonGatewayAPINotInstalled, 30*time.Second)

	// An aggregated API for the group whose server is missing: the
	// target's discovery of gateway.networking.k8s.io/v1 answers 503.
	apiService := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"group": "gateway.networking.k8s.io", "version": "v1",
		"service":               map[string]any{"namespace": "default", "name": "no-such-gateway-api", "port": int64(443)},
		"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
	}}}
	apiService.SetAPIVersion("apiregistration.k8s.io/v1")
	apiService.SetKind("APIService")
	apiService.SetName("v1.gateway.networking.k8s.io")
	if err := bare.client.Create(t.Context(), apiService); err != nil {
		t.Fatal(err)
	}
	// The HealthCheck retries every 10 s on a target with no endpoints,
	// and each pass probes again.
	c := s.condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonCapabilityProbeFailed, 30*time.Second)
	if !strings.Contains(c.Message, "cannot tell whether the target cluster serves the Gateway API") {
		t.Errorf("CapabilityProbeFailed message %q", c.Message)
	}

	if err := bare.client.Delete(t.Context(), apiService); err != nil {
		t.Fatal(err)
	}
	s.condition(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionFalse, v1alpha1.ReasonGatewayAPINotInstalled, 30*time.Second)
}

// TestGlanceStepErrorCounted: a step of a targeted Glance that fails counts
// under its name, as for a Glance on the management cluster. This suite has
// no webhook, so the spec reaches the reconciler as a CR that bypassed it.
func TestGlanceStepErrorCounted(t *testing.T) {
	s := newGlanceScene(t)
	s.Credentials("pw")
	errorsOf := func() float64 {
		return testutil.ToFloat64(s.mgr.Metrics.Reconcile.Errors.WithLabelValues("DBConnectionSecret", v1alpha1.ConditionSecretsReady))
	}
	before := errorsOf()
	s.glance(func(g *v1alpha1.Glance) {
		g.Spec.Database.ClusterRef = nil
		g.Spec.Database.Host = "db.example.com/glance?x="
	})
	c := s.condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError, 30*time.Second)
	if !strings.Contains(c.Message, "cannot build the database connection") {
		t.Errorf("SecretsReady message %q", c.Message)
	}
	operatortest.Eventually(t, "a DBConnectionSecret step error counted", func() error {
		if n := errorsOf(); n <= before {
			return fmt.Errorf("glance_operator_reconcile_errors_total{sub_reconciler=DBConnectionSecret} = %v", n)
		}
		return nil
	}, operatortest.Within(10*time.Second))
}
