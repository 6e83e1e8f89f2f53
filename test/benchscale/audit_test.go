package benchscale

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const manager = "system:serviceaccount:glance-system:glance-operator"

// auditLines are audit.k8s.io/v1 Events as kube-apiserver writes them at
// level Metadata, trimmed to the fields read, one per line.
var auditLines = []string{
	// Opened before the first window: counted in it, and its end later on
	// is not counted again.
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","requestURI":"/api/v1/secrets?watch=true","verb":"watch","user":{"username":"` + manager + `"},"objectRef":{"resource":"secrets","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}`,
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench/secrets/glance-0-db","verb":"get","user":{"username":"` + manager + `"},"objectRef":{"resource":"secrets","namespace":"bench","name":"glance-0-db","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}`,
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/bench/deployments","verb":"create","user":{"username":"` + manager + `"},"objectRef":{"resource":"deployments","namespace":"bench","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201}}`,
	// Someone else's request: not the manager's.
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a3","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench/pods","verb":"list","user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"bench","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}`,
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a4","stage":"ResponseComplete","requestURI":"/apis/glance.openstack.org/v1alpha1/namespaces/bench/glances/glance-0/status","verb":"update","user":{"username":"` + manager + `"},"objectRef":{"resource":"glances","namespace":"bench","name":"glance-0","apiGroup":"glance.openstack.org","apiVersion":"v1alpha1","subresource":"status"},"responseStatus":{"metadata":{},"status":"Failure","reason":"Conflict","code":409}}`,
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a5","stage":"ResponseComplete","requestURI":"/apis/glance.openstack.org/v1alpha1/namespaces/bench/glances/glance-0/status?fieldManager=glance-operator","verb":"patch","user":{"username":"` + manager + `"},"objectRef":{"resource":"glances","namespace":"bench","name":"glance-0","apiGroup":"glance.openstack.org","apiVersion":"v1alpha1","subresource":"status"},"responseStatus":{"metadata":{},"code":200}}`,
	// The second window.
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseComplete","requestURI":"/api/v1/secrets?watch=true","verb":"watch","user":{"username":"` + manager + `"},"objectRef":{"resource":"secrets","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}`,
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a6","stage":"ResponseComplete","requestURI":"/apis?timeout=32s","verb":"get","user":{"username":"` + manager + `"},"responseStatus":{"metadata":{},"code":200}}`,
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a7","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/bench/secrets/glance-0-db","verb":"get","user":{"username":"` + manager + `"},"objectRef":{"resource":"secrets","namespace":"bench","name":"glance-0-db","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}`,
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a8","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/bench/deployments/glance-0","verb":"delete","user":{"username":"` + manager + `"},"objectRef":{"resource":"deployments","namespace":"bench","name":"glance-0","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":404}}`,
}

func TestAuditLogWindows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	first := strings.Join(auditLines[:6], "\n") + "\n"
	// The API server is half-way through the next event.
	half := auditLines[6][:40]
	if err := os.WriteFile(path, []byte(first+half), 0o644); err != nil {
		t.Fatal(err)
	}
	log := newAuditLog(path, manager)
	got, err := log.next()
	if err != nil {
		t.Fatal(err)
	}
	want := requestCounts{
		{"watch", "secrets"}:                              {Requests: 1},
		{"get", "secrets"}:                                {Requests: 1},
		{"create", "deployments.apps"}:                    {Requests: 1},
		{"update", "glances.glance.openstack.org/status"}: {Requests: 1, Failed: 1},
		{"patch", "glances.glance.openstack.org/status"}:  {Requests: 1},
	}
	checkCounts(t, "first window", got, want)
	if requests, writes, failed := got.totals(); requests != 5 || writes != 3 || failed != 1 {
		t.Errorf("first window: %d requests, %d writes, %d failed; want 5, 3, 1", requests, writes, failed)
	}

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(auditLines[6][len(half):] + "\n" + strings.Join(auditLines[7:], "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	second, err := log.next()
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, "second window", second, requestCounts{
		{"get", "/apis"}:               {Requests: 1},
		{"get", "secrets"}:             {Requests: 1},
		{"delete", "deployments.apps"}: {Requests: 1, Failed: 1},
	})
	if got, err = log.next(); err != nil || len(got) != 0 {
		t.Errorf("nothing new: %v, %v", got, err)
	}

	// Two Glances, a two-minute idle window; the ties of the first window
	// are broken by the second.
	rows := requestRows(want, second, 2, 0.5)
	if len(rows) != 7 || rows[0] != (RequestRow{Verb: "get", Resource: "secrets", Converging: 1, Idle: 1, PerGlance: 0.5, IdlePerMinute: 0.5}) {
		t.Errorf("rows: %+v", rows)
	}
}

func checkCounts(t *testing.T, what string, got, want requestCounts) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s %s: %+v, want %+v", what, k.Verb, k.Resource, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s %s: %+v", what, k.Verb, k.Resource, g)
		}
	}
}
