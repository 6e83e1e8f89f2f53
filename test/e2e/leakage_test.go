package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/leakscan"
)

// The credentials of the leakage story, each value unique to it, most with
// the characters that need escaping somewhere on their way ('$' for
// oslo.config, '/', '+', '%' and '@' for a URL, '"' and '\' for JSON) and
// the rotated ones with a line break.
var leakSecrets = []struct{ name, secret, key, value string }{
	{"db password", "glance-db", "password", `Lk-db1-Vq8$Zr2/Wm4+Hp%Ty@Bn`},
	{"service-user password", "glance-service-user", "password", `Lk-su1-Gx5$Jd9"Qe3\Uo`},
	{"S3 access key id", "s3-credentials", "access-key-id", "Lk-s3id-Rb7Kc2Fw9Nh"},
	{"S3 secret key", "s3-credentials", "secret-access-key", `Lk-s3k1-Mw3$$Yh7=Bn4~Pc`},
	{"rotated db password", "glance-db", "password", "Lk-db2-Rt7$Hq\nMv3#Ks=Yw?x"},
	{"rotated service-user password", "glance-service-user", "password", "Lk-su2-Jw6$Te\nTe9^Gh1&Qz"},
	{"rotated S3 secret key", "s3-credentials", "secret-access-key", `Lk-s3k2-Fm2$Wr8+Zt/Kd5`},
	{"S3 secret key with a line break", "s3-credentials", "secret-access-key", "Lk-s3k3-Lx1\nOq6$Ai9*Ej"},
	{"restored S3 secret key", "s3-credentials", "secret-access-key", `Lk-s3k4-Gv2$Io5:Ms8;Dk`},
}

// leakSecret is the value of the named credential of leakSecrets.
func leakSecret(name string) string {
	for _, s := range leakSecrets {
		if s.name == name {
			return s.value
		}
	}
	panic("no credential " + name)
}

// No credential leaves the Secrets it lives in. After a whole life —
// install, rotations of the DB password, the service-user password and the
// S3 secret key (values with '$' and line breaks; one the backend cannot
// render and skips), and an upgrade — no value is found, as written or in
// any encoding, in either binary's debug log, any Event, any status, either
// /metrics, or any object of the cluster but a Secret.
func TestNoSecretLeaks(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-leakage")
	s.worldWith(leakSecret("db password"), leakSecret("service-user password"),
		leakSecret("S3 access key id"), leakSecret("S3 secret key"))
	s.backend("s3-primary", true)
	s.glance()
	s.ready()
	s.podsRunning(2)

	for _, r := range []struct{ credential, annotation string }{
		{"rotated db password", "glance.c5c3.io/db-connection-hash"},
		{"rotated service-user password", "glance.c5c3.io/authtoken-hash"},
	} {
		before := s.deployment().Spec.Template.Annotations[r.annotation]
		s.rotate(r.credential)
		s.eventually("a new "+r.annotation, func() (bool, string) {
			got := s.deployment().Spec.Template.Annotations[r.annotation]
			return got != before, got
		})
		s.ready()
	}

	backends := s.mounted().backendsSecret
	s.rotate("rotated S3 secret key")
	s.eventually("a new backends Secret", func() (bool, string) {
		m := s.mounted()
		return m.backendsSecret != backends, m.backendsSecret
	})
	s.ready()

	// A secret key backends.conf cannot hold: the backend is skipped, and
	// the event says why without the value.
	s.rotate("S3 secret key with a line break")
	skipped := s.event(corev1.EventTypeWarning, v1alpha1.EventGlanceBackendSkipped)
	if !strings.Contains(skipped.Note, `backend "s3-primary" skipped`) {
		t.Errorf("GlanceBackendSkipped says %q", skipped.Note)
	}
	s.condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)
	backends = s.mounted().backendsSecret
	s.rotate("restored S3 secret key")
	s.eventually("a new backends Secret", func() (bool, string) {
		m := s.mounted()
		return m.backendsSecret != backends, m.backendsSecret
	})
	s.ready()

	s.update(release("2026.1"))
	s.events("UpgradeInitiated", "UpgradeComplete")
	if g := s.ready(); g.Status.InstalledRelease != "2026.1" {
		t.Fatalf("installed %q after the upgrade", g.Status.InstalledRelease)
	}
	s.podsRunning(2)

	secrets := map[string]string{}
	for _, c := range leakSecrets {
		secrets[c.name] = c.value
	}
	scanner := leakscan.NewScanner(secrets)

	// The scan finds what is there: the connection Secret holds the DB
	// password, percent-encoded, and its object as the API serves it holds
	// that in base64.
	var conn corev1.Secret
	s.get("glance-db-connection", &conn)
	connJSON, err := json.Marshal(conn)
	if err != nil {
		t.Fatal(err)
	}
	if found := scanner.Scan("Secret glance-db-connection", connJSON); !slices.ContainsFunc(found, func(f leakscan.Finding) bool {
		return f.Needle.Secret == "rotated db password" && strings.HasPrefix(f.Needle.Encoding, "base64")
	}) {
		t.Errorf("the scan does not find the rotated DB password in the connection Secret (found %v): it would miss a leak", found)
	}

	var leaks []leakscan.Finding
	debugLines := 0
	for _, path := range stk.BinaryLogs() {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		debugLines += strings.Count(string(data), "level=DEBUG")
		leaks = append(leaks, scanner.Scan("log "+path, data)...)
	}
	if debugLines == 0 {
		t.Error("the binaries logged no DEBUG line: the scan did not read debug logs")
	}
	for name, url := range map[string]string{"glance-operator": stk.ManagerMetricsURL, "glance-webhook": stk.WebhookMetricsURL} {
		leaks = append(leaks, scanner.Scan(name+" /metrics", scrapeText(t, url))...)
	}
	objects, scanned := scanObjects(t, scanner)
	leaks = append(leaks, objects...)
	for _, kind := range []string{"events", "events.events.k8s.io", "glances.glance.openstack.c5c3.io", "glancebackends.glance.openstack.c5c3.io", "configmaps", "pods", "deployments.apps"} {
		if scanned[kind] == 0 {
			t.Errorf("no %s scanned (scanned %v)", kind, scanned)
		}
	}
	for _, l := range leaks {
		t.Errorf("a credential leaked: %s", l)
	}
	t.Logf("scanned %d logs at debug level (%d DEBUG lines), both /metrics, and objects by resource %v", len(stk.BinaryLogs()), debugLines, scanned)
}

// worldWith is world with the given credentials.
func (s *scene) worldWith(dbPassword, serviceUserPassword, s3KeyID, s3SecretKey string) {
	s.t.Helper()
	s.secret("glance-db", map[string]string{"username": "glance", "password": dbPassword})
	s.secret("glance-service-user", map[string]string{"password": serviceUserPassword})
	s.secret("s3-credentials", map[string]string{"access-key-id": s3KeyID, "secret-access-key": s3SecretKey})
	s.mariaDB()
}

// rotate sets a credential of leakSecrets in its Secret, as External
// Secrets would after a rotation at the source.
func (s *scene) rotate(credential string) {
	s.t.Helper()
	i := slices.IndexFunc(leakSecrets, func(c struct{ name, secret, key, value string }) bool { return c.name == credential })
	c := leakSecrets[i]
	updateObj(s, c.secret, &corev1.Secret{}, func(sec *corev1.Secret) { sec.Data[c.key] = []byte(c.value) })
}

// scrapeText is the body of a /metrics endpoint.
func scrapeText(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return body
}

// scanObjects scans every object of every resource the API server lists,
// in all namespaces, but Secrets; it returns what it found and how many
// objects of each resource it read.
func scanObjects(t *testing.T, scanner *leakscan.Scanner) ([]leakscan.Finding, map[string]int) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(stk.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(stk.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var found []leakscan.Finding
	scanned := map[string]int{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || (gv.Group == "" && r.Name == "secrets") {
				continue
			}
			resource := r.Name
			if gv.Group != "" {
				resource += "." + gv.Group
			}
			list, err := dyn.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Errorf("list %s: %v", resource, err)
				continue
			}
			for _, item := range list.Items {
				data, err := json.Marshal(item.Object)
				if err != nil {
					t.Fatal(err)
				}
				found = append(found, scanner.Scan(fmt.Sprintf("%s %s/%s", resource, item.GetNamespace(), item.GetName()), data)...)
			}
			scanned[resource] = len(list.Items)
		}
	}
	return found, scanned
}
