package admission

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

func namespace(t *testing.T, cl client.Client, name string) string {
	t.Helper()
	if err := cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func newGlance(ns, name, rel string) *v1alpha1.Glance { return fixtures.NewGlance(ns, name, rel) }

func newBackend(ns, name string, isDefault bool) *v1alpha1.GlanceBackend {
	return fixtures.NewBackend(ns, name, "glance", isDefault, "s3")
}

func TestWarningsReachTheClient(t *testing.T) {
	cl, rec := newClient(t)
	ns := namespace(t, cl, "warnings")
	g := newGlance(ns, "glance", "2025.2")
	g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{Processes: ptr.To[int32](4)}}
	g.Spec.Staging = &v1alpha1.StagingSpec{Unbounded: true}
	if err := cl.Create(context.Background(), g); err != nil {
		t.Fatalf("create: %v", err)
	}
	want := []string{
		"spec.apiServer.uwsgi has no effect on 2025.2: releases before 2026.1 run the eventlet glance-api server; use spec.apiServer.workers",
		"spec.staging.unbounded: the staging and tasks-work volumes have no size limit; a large import can fill the node's disk, and the kubelet then evicts pods outside the PodDisruptionBudget",
	}
	if !slices.Equal(rec.Texts(), want) {
		t.Fatalf("warnings %q, want %q", rec.Texts(), want)
	}
}

func TestExactRejection(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "rejection")
	g := newGlance(ns, "glance", "2025.2")
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}}
	g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "authtoken", FilterFactory: "evil:factory"}}
	err := cl.Create(context.Background(), g)
	want := `admission webhook "vglances.glance.openstack.c5c3.io" denied the request: Glance.glance.openstack.c5c3.io "glance" is invalid: ` +
		`[spec.deployment.resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1, ` +
		`spec.middleware[0].name: Invalid value: "authtoken": is a filter or app the operator renders itself]`
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n  %v\nwant:\n  %s", err, want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid (422) error, got %v", err)
	}
}

// TestMiddlewareNamesThePasteDoesNotUse: only the names the rendered paste
// uses are refused; names Glance's own paste files use, which the operator's
// does not, are free (the reference operator accepts them too).
func TestMiddlewareNamesThePasteDoesNotUse(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "middleware-names")
	for _, name := range []string{"unauthenticated-context", "cachemanage", "main"} {
		g := newGlance(ns, name, "2025.2")
		g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: name, FilterFactory: "example.audit:filter_factory"}}
		if err := cl.Create(context.Background(), g); err != nil {
			t.Errorf("a middleware named %q refused: %v", name, err)
		}
	}
}

// TestReservedBackendNameNamesTheField: a reserved store name is refused
// under metadata.name, never as "<nil>".
func TestReservedBackendNameNamesTheField(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "reserved-backend")
	for _, name := range []string{"default", "database", "os-glance-staging"} {
		err := cl.Create(context.Background(), newBackend(ns, name, false))
		want := `admission webhook "vglancebackends.glance.openstack.c5c3.io" denied the request: GlanceBackend.glance.openstack.c5c3.io "` + name + `" is invalid: ` +
			`metadata.name: Invalid value: "` + name + `": is reserved: default, database, keystone_authtoken, glance_store, paste_deploy, oslo_policy and names starting with os_glance_ or os-glance- are Glance's own config sections`
		if err == nil || err.Error() != want {
			t.Errorf("error:\n  %v\nwant:\n  %s", err, want)
		}
	}
}

func TestDefaultsApplied(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "defaults")
	ctx := context.Background()
	if err := cl.Create(ctx, newGlance(ns, "glance", "2025.2")); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.Glance{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "glance"}, got); err != nil {
		t.Fatal(err)
	}
	d := got.Spec.Deployment
	// replicas and resources come from the mutating webhook; the grace
	// period and preStop sleep from the schema defaults the API server
	// applies again after the webhook's patch created the block.
	if d == nil || *d.Replicas != 3 || *d.TerminationGracePeriodSeconds != 30 || *d.PreStopSleepSeconds != 5 ||
		d.Resources.Requests.Cpu().String() != "100m" || d.Resources.Limits.Memory().String() != v1alpha1.DefaultMemoryLimit {
		t.Fatalf("deployment defaults missing: %+v", d)
	}
	if l := got.Spec.Logging; l == nil || l.Format != v1alpha1.LogFormatText || l.Level != "INFO" || l.Debug == nil || *l.Debug {
		t.Fatalf("logging defaults missing: %+v", l)
	}
	if got.Spec.ServiceUser.Username != "glance" || got.Spec.Database.Port != 3306 {
		t.Fatalf("schema defaults missing: %+v", got.Spec)
	}
}

func TestUpgradePath(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "upgrade")
	ctx := context.Background()
	g := newGlance(ns, "glance", "2025.2")
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Status.InstalledRelease = "2025.2"
	if err := cl.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}

	g.Spec.OpenStackRelease, g.Spec.Image.Tag = "2026.2", "2026.2"
	err := cl.Update(ctx, g)
	if err == nil || !strings.Contains(err.Error(), "spec.openStackRelease: Forbidden: 2026.2 skips releases after the installed 2025.2: upgrade one release at a time, next to 2026.1") {
		t.Fatalf("skip: %v", err)
	}
	g.Spec.OpenStackRelease, g.Spec.Image.Tag = "2026.1", "2026.1"
	if err := cl.Update(ctx, g); err != nil {
		t.Fatalf("next release: %v", err)
	}

	// Mid-upgrade: retargeting is refused, aborting is not.
	g.Status.UpgradePhase, g.Status.TargetRelease = v1alpha1.UpgradePhaseMigrating, "2026.1"
	if err := cl.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Spec.OpenStackRelease, g.Spec.Image.Tag = "2026.2", "2026.2"
	if err := cl.Update(ctx, g); err == nil || !strings.Contains(err.Error(), "is in flight (phase Migrating)") {
		t.Fatalf("retarget: %v", err)
	}
	g.Spec.OpenStackRelease, g.Spec.Image.Tag = "2025.2", "2025.2"
	if err := cl.Update(ctx, g); err != nil {
		t.Fatalf("abort: %v", err)
	}
}

func TestOneDefaultBackend(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "backends")
	ctx := context.Background()
	first := newBackend(ns, "first", true)
	first.Finalizers = []string{"example.com/hold"}
	if err := cl.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	err := cl.Create(ctx, newBackend(ns, "second", true))
	if err == nil || !strings.Contains(err.Error(), `spec.isDefault: Invalid value: true: GlanceBackend "first" is already the default store of Glance "glance"; unset its isDefault first`) {
		t.Fatalf("second default: %v", err)
	}
	// A default being deleted no longer counts.
	if err := cl.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, newBackend(ns, "second", true)); err != nil {
		t.Fatalf("default beside a terminating one: %v", err)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
		t.Fatal(err)
	}
	first.Finalizers = nil
	if err := cl.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
}

func TestPriorityClassLookup(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "priority")
	ctx := context.Background()
	g := newGlance(ns, "glance", "2025.2")
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{PriorityClassName: ptr.To("openstack-gold")}
	err := cl.Create(ctx, g.DeepCopy())
	if err == nil || !strings.Contains(err.Error(), `spec.deployment.priorityClassName: Not found: "openstack-gold"`) {
		t.Fatalf("missing PriorityClass: %v", err)
	}
	if err := cl.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "openstack-gold"}, Value: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, g.DeepCopy()); err != nil {
		t.Fatalf("existing PriorityClass: %v", err)
	}
}

// TestWebhookDownBlocksWritesNotDeletes points the webhooks at a closed port:
// spec writes fail closed, while the writes that cannot change a verdict go
// through: metadata-only updates (the operator adding its finalizer or an
// annotation), and deleting a Glance the operator finalized, which ends in
// the update that removes the finalizer.
func TestWebhookDownBlocksWritesNotDeletes(t *testing.T) {
	cl, _ := newClient(t)
	ns := namespace(t, cl, "outage")
	ctx := context.Background()
	finalized := newGlance(ns, "glance", "2025.2")
	finalized.Finalizers = []string{glance.Finalizer}
	if err := cl.Create(ctx, finalized); err != nil {
		t.Fatal(err)
	}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/"
	restore := repointWebhooks(t, cl, dead)
	defer restore()

	operatortest.Eventually(t, "a create with the webhook down to fail closed", func() error {
		err := cl.Create(ctx, newGlance(ns, "blocked", "2025.2"))
		if err == nil {
			_ = cl.Delete(ctx, newGlance(ns, "blocked", "2025.2"))
			return errors.New("created: the API server has not seen the new configuration yet")
		}
		if !strings.Contains(err.Error(), "failed calling webhook") {
			return err
		}
		return nil
	}, operatortest.Every(200*time.Millisecond))

	key := client.ObjectKeyFromObject(finalized)
	var g v1alpha1.Glance
	if err := cl.Get(ctx, key, &g); err != nil {
		t.Fatal(err)
	}
	specEdit := g.DeepCopy()
	specEdit.Spec.Region = "elsewhere"
	if err := cl.Update(ctx, specEdit); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("a spec update with the webhook down: %v, want it refused", err)
	}
	g.Annotations = map[string]string{"example.com/touched": "true"}
	if err := cl.Update(ctx, &g); err != nil {
		t.Fatalf("a metadata-only update with the webhook down: %v", err)
	}

	if err := cl.Delete(ctx, &g); err != nil {
		t.Fatalf("delete with the webhook down: %v", err)
	}
	if err := cl.Get(ctx, key, &g); err != nil || g.DeletionTimestamp == nil {
		t.Fatalf("the finalized Glance is not Terminating: %v", err)
	}
	g.Finalizers = nil
	if err := cl.Update(ctx, &g); err != nil {
		t.Fatalf("removing the finalizer with the webhook down: %v", err)
	}
	if err := cl.Get(ctx, key, &g); !apierrors.IsNotFound(err) {
		t.Fatalf("the Glance is still there after its finalizer went: %v", err)
	}
}

func repointWebhooks(t *testing.T, cl client.Client, base string) func() {
	t.Helper()
	ctx := context.Background()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := cl.Get(ctx, client.ObjectKey{Name: webhook.ConfigurationName}, m); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, client.ObjectKey{Name: webhook.ConfigurationName}, v); err != nil {
		t.Fatal(err)
	}
	origM, origV := m.DeepCopy(), v.DeepCopy()
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig.URL = ptr.To(base + strings.TrimPrefix(urlPath(*m.Webhooks[i].ClientConfig.URL), "/"))
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.URL = ptr.To(base + strings.TrimPrefix(urlPath(*v.Webhooks[i].ClientConfig.URL), "/"))
	}
	if err := cl.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := cl.Update(ctx, v); err != nil {
		t.Fatal(err)
	}
	return func() {
		for _, obj := range []client.Object{origM, origV} {
			obj.SetResourceVersion("")
			cur := obj.DeepCopyObject().(client.Object)
			if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				t.Error(err)
				continue
			}
			obj.SetResourceVersion(cur.GetResourceVersion())
			if err := cl.Update(ctx, obj); err != nil {
				t.Error(err)
			}
		}
		// Wait until the API server calls the live webhook again.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			g := newGlance("outage", "probe", "2025.2")
			err := cl.Create(ctx, g)
			if err == nil {
				_ = cl.Delete(ctx, g)
			}
			return err == nil, nil
		})
	}
}

func urlPath(u string) string {
	i := strings.Index(u, "://")
	rest := u[i+3:]
	return rest[strings.Index(rest, "/"):]
}

func kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	return controlplane.Kubectl(t, cfg, stdin, args...)
}

const kubectlGlance = `apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: Glance
metadata:
  name: glance
  namespace: kubectl
spec:
  openStackRelease: "%s"
  image: {repository: registry.example.com/openstack/glance, tag: "%s"}
  database: {clusterRef: {name: mariadb}, database: glance, secretRef: {name: glance-db}}
  keystoneEndpoint: http://keystone:5000/v3
  serviceUser: {secretRef: {name: glance-service-user}}
  apiServer:
    uwsgi: {processes: 4}
`

// TestKubectlApply is the user's view: the inert-knob warning printed on a
// successful apply, and the release jump denied naming the field.
func TestKubectlApply(t *testing.T) {
	cl, _ := newClient(t)
	namespace(t, cl, "kubectl")
	manifest := func(rel string) string { return strings.ReplaceAll(kubectlGlance, "%s", rel) }

	out, err := kubectl(t, manifest("2025.2"), "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	for _, want := range []string{
		"Warning: spec.apiServer.uwsgi has no effect on 2025.2: releases before 2026.1 run the eventlet glance-api server; use spec.apiServer.workers",
		"glance.glance.openstack.c5c3.io/glance created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
		}
	}

	g := &v1alpha1.Glance{}
	ctx := context.Background()
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "kubectl", Name: "glance"}, g); err != nil {
		t.Fatal(err)
	}
	g.Status.InstalledRelease = "2025.2"
	if err := cl.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	out, err = kubectl(t, manifest("2026.2"), "apply", "-f", "-")
	if err == nil {
		t.Fatalf("kubectl apply of a release jump succeeded:\n%s", out)
	}
	if !strings.Contains(out, "spec.openStackRelease: Forbidden: 2026.2 skips releases after the installed 2025.2") {
		t.Errorf("kubectl apply output does not name spec.openStackRelease:\n%s", out)
	}
}
