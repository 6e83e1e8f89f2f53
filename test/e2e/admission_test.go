package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// uwsgiOn2025 is a Glance on 2025.2 with uWSGI knobs, which do nothing
// before 2026.1.
const uwsgiOn2025 = `apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: Glance
metadata:
  name: glance
  namespace: e2e-admission
spec:
  openStackRelease: "2025.2"
  image: {repository: registry.example.com/openstack/glance, tag: "2025.2"}
  database: {clusterRef: {name: mariadb}, database: glance, secretRef: {name: glance-db}}
  cache: {servers: ["memcached:11211"]}
  keystoneEndpoint: http://keystone:5000/v3
  serviceUser: {secretRef: {name: glance-service-user}}
  apiServer:
    uwsgi: {processes: 4}
`

// The admission webhook as users meet it, through the real API server and
// kubectl: a warning for an inert knob, the webhook's defaults in the stored
// object, and denials naming the field.
func TestAdmission(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-admission")

	out, err := controlplane.Kubectl(t, stk.Config, uwsgiOn2025, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	const warning = "Warning: spec.apiServer.uwsgi has no effect on 2025.2: releases before 2026.1 run the eventlet glance-api server; use spec.apiServer.workers"
	if !strings.Contains(out, warning) || !strings.Contains(out, "glance.glance.openstack.c5c3.io/glance created") {
		t.Errorf("kubectl apply printed:\n%s\nwant the warning %q and the creation", out, warning)
	}

	// Only the webhook fills these in: the CRD schema has no default for an
	// absent spec.deployment or for the uwsgi block's siblings.
	g := s.glanceObj()
	d := g.Spec.Deployment
	switch {
	case d == nil || ptr.Deref(d.Replicas, 0) != 3:
		t.Errorf("spec.deployment %+v, want the webhook's default of 3 replicas", d)
	case !d.Resources.Requests.Cpu().Equal(resource.MustParse("100m")) || !d.Resources.Limits.Memory().Equal(resource.MustParse(v1alpha1.DefaultMemoryLimit)):
		t.Errorf("spec.deployment.resources %+v, want the webhook's defaults", d.Resources)
	}
	if u := g.Spec.APIServer.UWSGI; ptr.Deref(u.Processes, 0) != 4 || ptr.Deref(u.Threads, 0) != 1 || !ptr.Deref(u.HTTPKeepAlive, false) {
		t.Errorf("spec.apiServer.uwsgi %+v, want processes 4 kept and threads 1, httpKeepAlive true defaulted", u)
	}

	// The Go client sees the same warning on an update. Only an update that
	// changes the spec reaches the webhook (its match conditions), so this
	// one changes the inert knob.
	warnings := &operatortest.WarningRecorder{}
	wcfg := rest.CopyConfig(stk.Config)
	wcfg.WarningHandler = warnings
	wcl, err := client.New(wcfg, client.Options{Scheme: cl.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		g := s.glanceObj()
		g.Spec.APIServer.UWSGI.Processes = ptr.To[int32](5)
		err := wcl.Update(context.Background(), g)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if !warnings.Has(strings.TrimPrefix(warning, "Warning: ")) {
		t.Errorf("the update returned warnings %q", warnings.Texts())
	}

	// A release skip is denied, naming the field, by kubectl and the client.
	out, err = controlplane.Kubectl(t, stk.Config, "", "-n", s.ns, "patch", "glance", "glance", "--type=merge",
		"-p", `{"spec":{"openStackRelease":"2026.2","image":{"tag":"2026.2"}}}`)
	if err == nil || !strings.Contains(out, "spec.openStackRelease") || !strings.Contains(out, "denied") && !strings.Contains(out, "invalid") {
		t.Errorf("kubectl patch to 2026.2: %v\n%s\nwant a denial naming spec.openStackRelease", err, out)
	}
	err = s.tryUpdate(release("2026.2"))
	var status *apierrors.StatusError
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("an update to 2026.2: %v, want Invalid", err)
	}
	fields := []string{}
	for _, c := range status.Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	if !strings.Contains(strings.Join(fields, ","), "spec.openStackRelease") {
		t.Errorf("the denial names fields %v, want spec.openStackRelease (%v)", fields, err)
	}
	if g := s.glanceObj(); g.Spec.OpenStackRelease != "2025.2" {
		t.Errorf("the denied release was stored: %s", g.Spec.OpenStackRelease)
	}

	// One default store per Glance.
	s.backend("alpha", true)
	b := &v1alpha1.GlanceBackend{}
	b.Name, b.Namespace = "beta", s.ns
	b.Spec = v1alpha1.GlanceBackendSpec{
		GlanceRef: v1alpha1.LocalObjectReference{Name: "glance"}, Type: v1alpha1.BackendTypeS3, IsDefault: true,
		S3: &v1alpha1.S3BackendSpec{Host: "http://s3:9000", Bucket: "beta", CredentialsSecretRef: v1alpha1.LocalObjectReference{Name: "s3-credentials"}},
	}
	err = cl.Create(context.Background(), b)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.isDefault") {
		t.Errorf("a second default backend: %v, want it denied naming spec.isDefault", err)
	}
}
