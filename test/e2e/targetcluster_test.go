package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/stack"
)

// The target cluster stories run on a second full local cluster, "region-a",
// registered with the manager by a kubeconfig Secret that carries a token of
// the manager's ServiceAccount there, bound to the chart's target-cluster
// ClusterRole. Its kwok starts the glance-api pods at a test host's address
// where a stand-in answers /healthcheck, so the manager's probe goes
// through the target API server's service proxy to a real server. The
// stories share the one target and run in order.

const targetName = "region-a"

// targetHealthSubnet is the /30 of the target's test host.
var targetHealthSubnet = netip.MustParsePrefix("10.244.252.0/30")

// mariaDBChildren are the mariadb-operator objects a Glance makes.
var mariaDBChildren = []string{"Database", "User", "Grant"}

func TestTargetCluster(t *testing.T) {
	t.Parallel()
	tgt, err := stk.StartTarget(t.Context(), stack.TargetOptions{Name: targetName, HealthSubnet: targetHealthSubnet})
	if err != nil {
		t.Fatalf("start the target cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := tgt.Stop(); err != nil {
			t.Errorf("stop the target cluster: %v", err)
		}
	})
	if err := tgt.Register(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	s := newScene(t, "e2e-target")
	s.remote = tgt.Client
	s.createOn(tgt.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})
	s.eventually("the target's default ServiceAccount", func() (bool, string) {
		err := tgt.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, fmt.Sprint(err)
	})

	t.Run("register", func(t *testing.T) { targetRegister(t, s, tgt) })
	t.Run("restore", func(t *testing.T) { targetRestore(t, s, tgt) })
	t.Run("deregister and return", func(t *testing.T) { targetDeregisterAndReturn(t, s, tgt) })
	t.Run("capability", func(t *testing.T) { targetCapability(t, s, tgt) })
	t.Run("refused kubeconfig", func(t *testing.T) { targetRefusedKubeconfig(t, tgt) })
	t.Run("scale", func(t *testing.T) { targetScale(t, tgt) })
	t.Run("unreachable", func(t *testing.T) { targetUnreachable(t, s, tgt) })
	t.Run("abandon", func(t *testing.T) { targetAbandon(t, s) })
	t.Run("least privilege", func(t *testing.T) { targetNotForbidden(t, tgt) })
}

// on is the scene for a subtest: same namespace and clusters, the
// subtest's own failures.
func (s *scene) on(t *testing.T) *scene {
	c := *s
	c.t = t
	return &c
}

// register: the Glance turns Ready with its children on the target, owner
// labels instead of owner references, and none on the management cluster;
// its health probe passed through the target's service proxy.
func targetRegister(t *testing.T, parent *scene, tgt *stack.Target) {
	s := parent.on(t)
	s.world()
	s.backend("s3-primary", true)
	s.glance(func(g *v1alpha1.Glance) { g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: targetName} })
	g := s.ready()

	api := g.Status.Conditions[slices.IndexFunc(g.Status.Conditions, func(c metav1.Condition) bool { return c.Type == v1alpha1.ConditionGlanceAPIReady })]
	proxyPath := fmt.Sprintf("/api/v1/namespaces/%s/services/glance:%d/proxy/healthcheck", s.ns, v1alpha1.APIPort)
	if !strings.HasPrefix(api.Message, tgt.Server()+proxyPath) {
		t.Errorf("GlanceAPIReady says %q, want the probe through the target's service proxy %s%s", api.Message, tgt.Server(), proxyPath)
	}
	if n := tgt.HealthcheckRequests(); n == 0 {
		t.Error("the stand-in glance-api on the target's test host got no /healthcheck request")
	}

	children := s.targetChildren(tgt)
	for _, want := range []string{"Deployment/glance", "Service/glance", "Job/glance-db-sync", "Database/glance", "User/glance", "Grant/glance"} {
		if !slices.Contains(children, want) {
			t.Errorf("no %s on the target; its children are %v", want, children)
		}
	}
	for _, kind := range []string{"ConfigMap", "Secret", "CronJob"} {
		if !slices.ContainsFunc(children, func(c string) bool { return strings.HasPrefix(c, kind+"/") }) {
			t.Errorf("no %s on the target; its children are %v", kind, children)
		}
	}
	for _, child := range children {
		kind, name, _ := strings.Cut(child, "/")
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(childGVK(t, kind))
		err := cl.Get(context.Background(), s.key(name), u)
		switch {
		case err == nil:
			t.Errorf("%s exists on the management cluster too", child)
		case !apierrors.IsNotFound(err):
			t.Errorf("get %s on the management cluster: %v", child, err)
		}
	}
	d := &appsv1.Deployment{}
	if err := tgt.Client.Get(context.Background(), s.key("glance"), d); err != nil {
		t.Fatal(err)
	}
	if len(d.OwnerReferences) != 0 {
		t.Errorf("the target's Deployment has owner references %v; a target child carries owner labels", d.OwnerReferences)
	}
}

// childKinds are the kinds a Glance makes on its cluster, with the group
// of the kinds that are not the API server's own.
var childKinds = map[string]schema.GroupVersionKind{
	"Database": render.DatabaseGVK,
	"User":     render.UserGVK,
	"Grant":    render.GrantGVK,
}

func childGVK(t *testing.T, kind string) schema.GroupVersionKind {
	t.Helper()
	if gvk, ok := childKinds[kind]; ok {
		return gvk
	}
	for _, obj := range targetcluster.OwnedKinds() {
		gvk, err := apiutil.GVKForObject(obj, cl.Scheme())
		if err != nil {
			t.Fatal(err)
		}
		if gvk.Kind == kind {
			return gvk
		}
	}
	t.Fatalf("no child kind %s", kind)
	return schema.GroupVersionKind{}
}

// targetChildren lists, as Kind/name, what on the target carries the owner
// labels of the scene's Glance.
func (s *scene) targetChildren(tgt *stack.Target) []string {
	s.t.Helper()
	var out []string
	for _, kind := range s.childKindNames() {
		list := &unstructured.UnstructuredList{}
		gvk := childGVK(s.t, kind)
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := tgt.Client.List(context.Background(), list, client.InNamespace(s.ns), client.MatchingLabels{
			targetcluster.OwnerKindLabel: "Glance", targetcluster.OwnerNameLabel: "glance", targetcluster.OwnerNamespaceLabel: s.ns,
		}); err != nil {
			s.t.Fatalf("list %s on the target: %v", kind, err)
		}
		for _, item := range list.Items {
			out = append(out, kind+"/"+item.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func (s *scene) childKindNames() []string {
	names := slices.Clone(mariaDBChildren)
	for _, obj := range targetcluster.OwnedKinds() {
		gvk, err := apiutil.GVKForObject(obj, cl.Scheme())
		if err != nil {
			s.t.Fatal(err)
		}
		names = append(names, gvk.Kind)
	}
	return names
}

// targetVersions are the resourceVersions of the Glance's children on the
// target, by Kind/name.
func (s *scene) targetVersions(tgt *stack.Target) map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for _, child := range s.targetChildren(tgt) {
		kind, name, _ := strings.Cut(child, "/")
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(childGVK(s.t, kind))
		if err := tgt.Client.Get(context.Background(), s.key(name), u); err != nil {
			s.t.Fatalf("get %s on the target: %v", child, err)
		}
		out[child] = u.GetResourceVersion()
	}
	return out
}

// restore: the target's Deployment, deleted or edited, comes back as the
// Glance says.
func targetRestore(t *testing.T, parent *scene, tgt *stack.Target) {
	s := parent.on(t)
	d := &appsv1.Deployment{}
	if err := tgt.Client.Get(context.Background(), s.key("glance"), d); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Client.Delete(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	s.eventually("the target's Deployment re-created", func() (bool, string) {
		now := &appsv1.Deployment{}
		err := tgt.Client.Get(context.Background(), s.key("glance"), now)
		return err == nil && now.UID != d.UID, fmt.Sprintf("get: %v", err)
	})
	for {
		if err := tgt.Client.Get(context.Background(), s.key("glance"), d); err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = ptr.To[int32](5)
		err := tgt.Client.Update(context.Background(), d)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	s.eventually("the target's Deployment back at 2 replicas", func() (bool, string) {
		now := &appsv1.Deployment{}
		if err := tgt.Client.Get(context.Background(), s.key("glance"), now); err != nil {
			return false, err.Error()
		}
		return ptr.Deref(now.Spec.Replicas, 0) == 2, fmt.Sprintf("replicas %d", ptr.Deref(now.Spec.Replicas, 0))
	})
	s.ready()
}

// deregister and return: without its kubeconfig Secret the target is
// unavailable; with it back the Glance is Ready again and no unchanged
// child is written.
func targetDeregisterAndReturn(t *testing.T, parent *scene, tgt *stack.Target) {
	s := parent.on(t)
	before := s.targetVersions(tgt)
	if err := stk.Deregister(t.Context(), targetName); err != nil {
		t.Fatal(err)
	}
	s.conditionSaying(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, "not registered")
	s.condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	if err := tgt.Register(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	s.ready()
	after := s.targetVersions(tgt)
	for child, rv := range before {
		if after[child] != rv {
			t.Errorf("%s on the target was written (resourceVersion %s, then %s) though nothing about it changed", child, rv, after[child])
		}
	}
	for child := range after {
		if _, ok := before[child]; !ok {
			t.Errorf("%s is new on the target after the return", child)
		}
	}
}

// least privilege: the target answered none of the manager's requests 403
// under the chart's target-cluster ClusterRole (what it denied and the
// manager logged fails the suite at its end).
func targetNotForbidden(t *testing.T, tgt *stack.Target) {
	forbidden, err := stk.ManagerForbiddenRequests(t.Context(), tgt.Server())
	if err != nil {
		t.Fatal(err)
	}
	if len(forbidden) > 0 {
		t.Errorf("the target answered glance-operator 403 (by method: %v) under the chart's target-cluster ClusterRole; see %s", forbidden, stk.ManagerLog)
	}
}

// unreachable: with the target's API server stopped the Glance says the
// target is not reachable and the gauge says it is disconnected; with it
// started again both recover.
func targetUnreachable(t *testing.T, parent *scene, tgt *stack.Target) {
	s := parent.on(t)
	if err := tgt.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := tgt.StartAPIServer(context.Background()); err != nil {
				t.Errorf("start the target's API server again: %v", err)
			}
		}
	})
	s.conditionSaying(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, "not reachable")
	s.eventually("the gauge saying region-a is disconnected", func() (bool, string) {
		v := metricValue(t, "glance_operator_target_clusters", map[string]string{"cluster": targetName, "connected": "false"})
		return v == 1, fmt.Sprintf("glance_operator_target_clusters{connected=false} = %v", v)
	})
	restarted = true
	if err := tgt.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.ready()
	if v := metricValue(t, "glance_operator_target_clusters", map[string]string{"cluster": targetName, "connected": "true"}); v != 1 {
		t.Errorf("glance_operator_target_clusters{cluster=%q,connected=true} = %v once Ready again, want 1", targetName, v)
	}
}

// capability: the Gateway API served on the target gives an HTTPRoute
// there, accepted by the target's Gateway.
func targetCapability(t *testing.T, parent *scene, tgt *stack.Target) {
	s := parent.on(t)
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "public", Namespace: s.ns},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "stand-in",
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	s.createOn(tgt.Client, gw)
	s.update(func(g *v1alpha1.Glance) {
		g.Spec.Gateway = &v1alpha1.GatewaySpec{ParentRef: v1alpha1.GatewayParentReference{Name: "public"}, Hostname: "images.region-a.example.com"}
	})
	s.conditionSaying(v1alpha1.ConditionHTTPRouteReady, metav1.ConditionTrue, v1alpha1.ReasonHTTPRouteAccepted, "Gateway public accepted HTTPRoute glance")
	if err := tgt.Client.Get(context.Background(), s.key("glance"), &gatewayv1.HTTPRoute{}); err != nil {
		t.Errorf("the HTTPRoute on the target: %v", err)
	}
	if err := cl.Get(context.Background(), s.key("glance"), &gatewayv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
		t.Errorf("the HTTPRoute on the management cluster: %v, want NotFound", err)
	}
	s.update(func(g *v1alpha1.Glance) { g.Spec.Gateway = nil })
	s.eventually("the target's HTTPRoute deleted", func() (bool, string) {
		err := tgt.Client.Get(context.Background(), s.key("glance"), &gatewayv1.HTTPRoute{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	s.ready()
}

// refused kubeconfig: a target whose kubeconfig runs an exec plugin is
// refused, and a Glance naming it says so.
func targetRefusedKubeconfig(t *testing.T, tgt *stack.Target) {
	s := newScene(t, "e2e-target-refused")
	const name = "region-exec"
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster: {server: %[2]q, insecure-skip-tls-verify: true}
users:
- name: exec
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/false}
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: exec}
current-context: %[1]s
`, name, tgt.Server())
	if err := stk.RegisterKubeconfig(t.Context(), name, []byte(kubeconfig)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stk.Deregister(context.Background(), name); err != nil {
			t.Error(err)
		}
	})
	s.glance(func(g *v1alpha1.Glance) { g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: name} })
	c := s.conditionSaying(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, "refused")
	if !strings.Contains(c.Message, "exec") {
		t.Errorf("the refusal %q does not say the kubeconfig runs an exec plugin", c.Message)
	}
	if g := s.glanceObj(); len(g.Finalizers) != 0 {
		t.Errorf("a Glance on a refused target took finalizers %v", g.Finalizers)
	}
}

// scaleTargets is how many target clusters the scale story registers.
const scaleTargets = 10

// scale: ten target clusters registered at once all connect; the
// manager's resident memory per cluster is logged for the note.
// They are ten registrations of the one target: each has its own
// controller-runtime cluster, caches and connections in the manager, which
// is what a cluster costs it.
func targetScale(t *testing.T, tgt *stack.Target) {
	s := newScene(t, "e2e-target-scale")
	before := managerRSS(t)
	for i := range scaleTargets {
		name := fmt.Sprintf("region-scale-%d", i)
		if err := tgt.Register(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := stk.Deregister(context.Background(), name); err != nil {
				t.Error(err)
			}
		})
	}
	s.eventually(fmt.Sprintf("%d more target clusters connected", scaleTargets), func() (bool, string) {
		connected := 0
		for i := range scaleTargets {
			connected += int(metricValue(t, "glance_operator_target_clusters", map[string]string{"cluster": fmt.Sprintf("region-scale-%d", i), "connected": "true"}))
		}
		return connected == scaleTargets, fmt.Sprintf("%d connected", connected)
	})
	after := managerRSS(t)
	t.Logf("manager RSS %d KiB with %d more target clusters connected, %d KiB before: %+d KiB per cluster",
		after, scaleTargets, before, (after-before)/scaleTargets)
}

// managerRSS reads the manager process's resident set in KiB.
func managerRSS(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", stk.ManagerPID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kib
		}
	}
	t.Fatal("no VmRSS in the manager's /proc status")
	return 0
}

// abandon: the Glance deleted while its target is deregistered leaves
// etcd, with a RemoteChildrenAbandoned event naming what stays there.
func targetAbandon(t *testing.T, parent *scene) {
	s := parent.on(t)
	if err := stk.Deregister(t.Context(), targetName); err != nil {
		t.Fatal(err)
	}
	s.conditionSaying(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, "not registered")
	if err := cl.Delete(context.Background(), s.glanceObj()); err != nil {
		t.Fatal(err)
	}
	s.gone("the Glance", "glance", &v1alpha1.Glance{})
	e := s.event(corev1.EventTypeWarning, "RemoteChildrenAbandoned")
	for _, obj := range []string{"Secret/" + s.ns + "/glance-db-connection", "Secret/" + s.ns + "/glance-db-user-a", "Secret/" + s.ns + "/glance-digest-key",
		"Deployment/" + s.ns + "/glance", "Service/" + s.ns + "/glance", "Database.k8s.mariadb.com/" + s.ns + "/glance"} {
		if !strings.Contains(e.Note, obj) {
			t.Errorf("RemoteChildrenAbandoned %q does not name the %s left on the target", e.Note, obj)
		}
	}
}
