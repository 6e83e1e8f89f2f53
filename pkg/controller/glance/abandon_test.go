package glance

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// everythingGlance is a managed Glance with every optional child, mid
// upgrade, in the longest namespace and under the longest name there can
// be.
func everythingGlance() *v1alpha1.Glance {
	g := fixtures.NewGlance(strings.Repeat("n", 63), "g"+strings.Repeat("x", 42), "2025.2")
	g.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	g.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{}
	g.Spec.Gateway = &v1alpha1.GatewaySpec{}
	g.Status.TargetRelease = "2026.1"
	g.Status.UpgradePhase = v1alpha1.UpgradePhaseMigrating
	return g
}

// TestAbandonedObjectsCoverEveryKind: whatever kind a Glance's children on a
// target may have, the abandoned objects name one of it; a child kind added
// later cannot be left out of the note unnoticed.
func TestAbandonedObjectsCoverEveryKind(t *testing.T) {
	g := everythingGlance()
	if g.Spec.Database.ClusterRef == nil {
		t.Fatal("the fixture's database is not managed")
	}
	credentials, others := abandonedObjects(g)
	all := append(credentials, others...)
	kinds := []string{httpRouteGVK.Kind, "Database.k8s.mariadb.com", "User.k8s.mariadb.com", "Grant.k8s.mariadb.com"}
	for _, obj := range targetcluster.OwnedKinds() {
		gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, gvk.Kind)
	}
	for _, kind := range kinds {
		found := false
		for _, o := range all {
			found = found || strings.HasPrefix(o, kind+"/"+g.Namespace+"/")
		}
		if !found {
			t.Errorf("no %s among the abandoned objects %v", kind, all)
		}
	}
}

// TestAbandonNoteKeepsTheCredentials: the note names each credential Secret
// by kind/namespace/name, first, within the API's bound on a note, even for
// the longest names and a long reason.
func TestAbandonNoteKeepsTheCredentials(t *testing.T) {
	g := everythingGlance()
	g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: strings.Repeat("c", 253)}
	note := abandonNote(g)
	if len(note) > maxEventNote {
		t.Fatalf("note of %d bytes, over the bound of %d", len(note), maxEventNote)
	}
	ns, name := g.Namespace, g.Name
	want := []string{
		"Secret/" + ns + "/" + name + "-db-connection",
		"Secret/" + ns + "/" + name + "-db-user-a",
		"Secret/" + ns + "/" + name + "-db-user-b",
		"Secret/" + ns + "/" + name + "-backends-<hash>",
		"Secret/" + ns + "/" + name + "-digest-key",
	}
	at := -1
	for _, w := range want {
		i := strings.Index(note, w)
		if i < 0 {
			t.Errorf("the note does not name %s:\n%s", w, note)
			continue
		}
		at = max(at, i)
	}
	if d := strings.Index(note, "Deployment/"); d >= 0 && d < at {
		t.Errorf("the note names the Deployment before every credential:\n%s", note)
	}

	// A short one is whole: every object, then why.
	g = fixtures.NewGlance("openstack", "glance", "2025.2")
	g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: "region-a"}
	note = abandonNote(g)
	for _, w := range []string{
		"Secret/openstack/glance-db-connection", "Deployment/openstack/glance", "ConfigMap/openstack/glance-config-<hash>",
		"CronJob/openstack/glance-db-purge", "Database.k8s.mariadb.com/openstack/glance", "User.k8s.mariadb.com/openstack/glance.b",
	} {
		if !strings.Contains(note, w) {
			t.Errorf("the note does not name %s:\n%s", w, note)
		}
	}
	for _, absent := range []string{"HorizontalPodAutoscaler", "NetworkPolicy", "HTTPRoute", "db-expand"} {
		if strings.Contains(note, absent) {
			t.Errorf("the note names a %s the spec and status never asked for:\n%s", absent, note)
		}
	}
	if !strings.HasSuffix(note, `target cluster "region-a", which is deregistered`) {
		t.Errorf("the note does not end with the target:\n%s", note)
	}
}
