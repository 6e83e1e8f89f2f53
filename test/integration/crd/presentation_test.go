package crd

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/controlplane"
)

func TestServerVersion(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != controlplane.KubernetesVersion || v.Major != "1" || v.Minor != "37" {
		t.Fatalf("server version %s (major %q minor %q), want %s", v.GitVersion, v.Major, v.Minor, controlplane.KubernetesVersion)
	}
}

func TestDiscovery(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	list, err := dc.ServerResourcesForGroupVersion("glance.openstack.c5c3.io/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"glances": "gl", "glancebackends": "glb"}
	found := 0
	for _, r := range list.APIResources {
		short, ok := want[r.Name]
		if !ok {
			continue
		}
		found++
		if !r.Namespaced {
			t.Errorf("%s is cluster-scoped, want namespaced", r.Name)
		}
		if !slices.Equal(r.ShortNames, []string{short}) {
			t.Errorf("%s short names %v, want [%s]", r.Name, r.ShortNames, short)
		}
		if !slices.Equal(r.Categories, []string{"openstack"}) {
			t.Errorf("%s categories %v, want [openstack]", r.Name, r.Categories)
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the 2 resources in discovery: %+v", found, list.APIResources)
	}
}

// TestSchemaDefaults checks what the CRD schema fills in on its own, without
// the mutating webhook.
func TestSchemaDefaults(t *testing.T) {
	ctx := context.Background()
	g := glance("defaults",
		set("spec.deployment", "{}"),
		set("spec.cache", "{servers: ['m:11211']}"),
		set("spec.apiServer", "{uwsgi: {}}"),
		set("spec.gateway", "{parentRef: {name: gw}, hostname: image.example.com}"),
		set("spec.logging", "{}"),
		set("spec.secretStoreRef", "{name: vault}"),
		set("spec.middleware", "[{name: a, filterFactory: 'm:f'}]"),
		set("spec.imageCache", "{size: 10Gi}"),
		set("spec.dbPurge", "{}"),
	)
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	b := backend("defaults")
	if err := cl.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		path string
		want any
	}{
		{g, "spec.deployment.replicas", int64(3)},
		{g, "spec.deployment.terminationGracePeriodSeconds", int64(30)},
		{g, "spec.deployment.preStopSleepSeconds", int64(5)},
		{g, "spec.database.port", int64(3306)},
		{g, "spec.database.credentialsMode", "Static"},
		{g, "spec.cache.backend", "dogpile.cache.pymemcache"},
		{g, "spec.serviceUser.username", "glance"},
		{g, "spec.serviceUser.projectName", "service"},
		{g, "spec.serviceUser.userDomainName", "Default"},
		{g, "spec.serviceUser.projectDomainName", "Default"},
		{g, "spec.apiServer.uwsgi.processes", int64(2)},
		{g, "spec.apiServer.uwsgi.threads", int64(1)},
		{g, "spec.apiServer.uwsgi.httpKeepAlive", true},
		{g, "spec.gateway.path", "/"},
		{g, "spec.logging.format", "text"},
		{g, "spec.logging.level", "INFO"},
		{g, "spec.logging.debug", false},
		{g, "spec.secretStoreRef.kind", "ClusterSecretStore"},
		{g, "spec.imageCache.maintenanceInterval", "30m"},
		{g, "spec.dbPurge.schedule", "0 3 * * *"},
		{g, "spec.dbPurge.suspend", false},
		{g, "spec.dbPurge.ageInDays", int64(30)},
		{g, "spec.dbPurge.maxRows", int64(100)},
		{g, "spec.dbPurge.activeDeadlineSeconds", int64(3600)},
		{g, "spec.dbPurge.successfulJobsHistoryLimit", int64(3)},
		{g, "spec.dbPurge.failedJobsHistoryLimit", int64(3)},
		{b, "spec.s3.bucketURLFormat", "path"},
	} {
		got, found, err := unstructured.NestedFieldNoCopy(tc.obj.Object, strings.Split(tc.path, ".")...)
		if err != nil || !found || got != tc.want {
			t.Errorf("%s %s = %v (found %v, %v), want %v", tc.obj.GetKind(), tc.path, got, found, err, tc.want)
		}
	}
	mw, _, _ := unstructured.NestedSlice(g.Object, "spec", "middleware")
	if len(mw) != 1 || mw[0].(map[string]any)["position"] != "after" {
		t.Errorf("spec.middleware[0].position not defaulted to after: %v", mw)
	}
	// Optional blocks that are absent stay absent: the operator resolves
	// their defaults, the schema does not invent them.
	for _, path := range []string{"spec.staging", "spec.targetClusterRef", "spec.autoscaling", "spec.networkPolicy"} {
		if _, found, _ := unstructured.NestedFieldNoCopy(g.Object, strings.Split(path, ".")...); found {
			t.Errorf("%s appeared although it was not set", path)
		}
	}
}

// kubectl runs the locally built kubectl against the test API server.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := controlplane.Kubectl(t, cfg, "", args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

func TestKubectlExplain(t *testing.T) {
	out := kubectl(t, "explain", "glance.spec.imageCache")
	for _, want := range []string{
		"KIND:       Glance",
		"imageCache enables the glance-api image cache on a per-pod emptyDir",
		"maintenanceInterval\t<string>",
		"size\t<Object> -required-",
		"The pruner keeps the cache at 80%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain glance.spec.imageCache lacks %q:\n%s", want, out)
		}
	}
	out = kubectl(t, "explain", "glb.spec.extraOptions")
	if !strings.Contains(out, "the options the operator renders itself") {
		t.Errorf("kubectl explain glb.spec.extraOptions lacks the field doc:\n%s", out)
	}
}

// setStatus writes status to obj through the status subresource.
func setStatus(t *testing.T, obj *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	if err := unstructured.SetNestedField(obj.Object, status, "status"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Status().Update(context.Background(), obj); err != nil {
		t.Fatalf("status update: %v", err)
	}
}

func TestPrinterColumns(t *testing.T) {
	ctx := context.Background()
	g := glance("printed")
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	status := map[string]any{
		"installedRelease": "2025.2",
		"upgradePhase":     "Migrating",
		"endpoint":         "http://printed.crd-validation.svc.cluster.local:9292/",
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "False", "reason": "NotAllReady", "message": "DatabaseReady: DBSyncFailed (attempt 3, next at 2026-01-01T00:04:00Z).",
			"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(1),
		}},
	}
	setStatus(t, g, status)
	out := kubectl(t, "get", "gl", "printed", "-n", namespace)
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if !slices.Equal(header, []string{"NAME", "READY", "RELEASE", "PHASE", "ENDPOINT", "AGE"}) {
		t.Errorf("kubectl get gl header %v", header)
	}
	for _, want := range []string{"printed", "False", "2025.2", "Migrating", "http://printed.crd-validation.svc.cluster.local:9292/"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get gl lacks %q:\n%s", want, out)
		}
	}

	// -o wide adds why the Glance is not Ready.
	out = kubectl(t, "get", "gl", "printed", "-n", namespace, "-o", "wide")
	header = strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if !slices.Equal(header, []string{"NAME", "READY", "RELEASE", "PHASE", "ENDPOINT", "AGE", "MESSAGE"}) {
		t.Errorf("kubectl get gl -o wide header %v", header)
	}
	if !strings.Contains(out, "DatabaseReady: DBSyncFailed (attempt 3, next at 2026-01-01T00:04:00Z).") {
		t.Errorf("kubectl get gl -o wide lacks Ready's message:\n%s", out)
	}

	b := backend("printed", set("spec.isDefault", "true"))
	if err := cl.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	out = kubectl(t, "get", "glb", "printed", "-n", namespace)
	header = strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if !slices.Equal(header, []string{"NAME", "READY", "TYPE", "DEFAULT", "GLANCE", "AGE"}) {
		t.Errorf("kubectl get glb header %v", header)
	}
	// No status yet: READY is blank, so the fields are NAME TYPE DEFAULT GLANCE AGE.
	row := strings.Fields(strings.Split(out, "\n")[1])
	if len(row) != 5 || !slices.Equal(row[:4], []string{"printed", "S3", "true", "glance"}) {
		t.Errorf("kubectl get glb row %v", row)
	}
	// -o wide adds why the backend is not Ready.
	backendStatus := map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "False", "reason": "NotAllReady", "message": "CredentialsReady: WaitingForCredentials.",
		"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(1),
	}}}
	setStatus(t, b, backendStatus)
	out = kubectl(t, "get", "glb", "printed", "-n", namespace, "-o", "wide")
	header = strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if !slices.Equal(header, []string{"NAME", "READY", "TYPE", "DEFAULT", "GLANCE", "AGE", "MESSAGE"}) {
		t.Errorf("kubectl get glb -o wide header %v", header)
	}
	if !strings.Contains(out, "CredentialsReady: WaitingForCredentials.") {
		t.Errorf("kubectl get glb -o wide lacks Ready's message:\n%s", out)
	}
	// The category lists both kinds.
	out = kubectl(t, "get", "openstack", "-n", namespace, "-o", "name")
	for _, want := range []string{"glance.glance.openstack.c5c3.io/printed", "glancebackend.glance.openstack.c5c3.io/printed"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get openstack lacks %s:\n%s", want, out)
		}
	}
	// The status subresource keeps spec writes from touching status.
	fresh := &unstructured.Unstructured{}
	fresh.SetGroupVersionKind(g.GroupVersionKind())
	if err := cl.Get(ctx, client.ObjectKeyFromObject(g), fresh); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(fresh.Object, "2024.1", "status", "installedRelease")
	_ = unstructured.SetNestedField(fresh.Object, "RegionTwo", "spec", "region")
	if err := cl.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(fresh.Object, "status", "installedRelease"); got != "2025.2" {
		t.Errorf("a spec update changed status.installedRelease to %q", got)
	}
}
