// Package database runs the manager against a real kube-apiserver and walks
// the Database and Deployment steps: provisioning, db-sync, the
// expand-migrate-contract upgrade with its abort and refusals, restarts,
// rotation and deletion. There is no kubelet or controller manager: the test
// plays the mariadb-operator, the Job controller and the Deployment
// controller by writing their status.
package database

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var (
	cfg *rest.Config
	cl  client.Client
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{
		CRDs: controlplane.CRDs{Glance: true, MariaDB: true, ExternalSecrets: true},
	}, func(srv *controlplane.APIServer) (func(), error) {
		cfg = srv.Config
		var err error
		cl, err = operatortest.NewClient(cfg)
		return nil, err
	}))
}

// scene is one test: its namespace, and a manager watching only it, so that
// a test can stop and restart its manager.
type scene struct {
	*operatortest.Scene
	t *testing.T
}

// newScene starts the scene's manager with the suite's options, changed by
// muts.
func newScene(t *testing.T, muts ...func(*operator.Options)) *scene {
	t.Helper()
	o := operator.Options{OperatorNamespace: "glance-system"}
	for _, m := range muts {
		m(&o)
	}
	return &scene{Scene: operatortest.NewScene(t, cfg, cl, o), t: t}
}

// dbGVKs are the mariadb-operator kinds of a managed Glance's database.
var dbGVKs = []schema.GroupVersionKind{render.DatabaseGVK, render.UserGVK, render.GrantGVK}

// ready builds a managed Glance's world: credentials, a default backend and
// a Ready MariaDB.
func (s *scene) ready(brownfield bool) {
	s.t.Helper()
	s.Credentials("pw")
	s.DefaultBackend("primary")
	if !brownfield {
		s.MariaDB(true)
	}
}

// provision plays the mariadb-operator: once the Database, User and Grant
// exist, they turn Ready.
func (s *scene) provision() {
	s.t.Helper()
	s.provisionObjects("glance", dbGVKs...)
}

// provisionUser plays the mariadb-operator for a database user slot's User
// and Grant, named name: once they exist, they turn Ready.
func (s *scene) provisionUser(name string) {
	s.t.Helper()
	s.provisionObjects(name, render.UserGVK, render.GrantGVK)
}

func (s *scene) provisionObjects(name string, gvks ...schema.GroupVersionKind) {
	s.t.Helper()
	for _, gvk := range gvks {
		s.Eventually(gvk.Kind+" "+name, func() bool {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, u) == nil
		}, nil)
		s.SetReady(gvk, name)
	}
}

// rollOutChange waits until the operator changed the Deployment's spec,
// then rolls it out.
func (s *scene) rollOutChange() {
	s.t.Helper()
	s.Deployment(func(d *appsv1.Deployment) bool { return d.Generation > d.Status.ObservedGeneration })
	s.RollOut()
}

// deleted waits until the object named glance, read into obj, is gone.
func (s *scene) deleted(what string, obj client.Object) {
	s.t.Helper()
	s.Eventually(what+" deleted", func() bool {
		return apierrors.IsNotFound(cl.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: "glance"}, obj))
	}, nil)
}

// upgrade installs a Glance of 2025.2 and asks for 2026.1.
func (s *scene) upgrade() {
	s.t.Helper()
	s.install()
	s.UpdateGlance(release("2026.1"))
}

// rollOutRelease waits until the Deployment's glance-api runs the image of
// rel, rolls it out, and returns it as the operator wrote it.
func (s *scene) rollOutRelease(rel string) *appsv1.Deployment {
	s.t.Helper()
	d := s.Deployment(func(d *appsv1.Deployment) bool { return runsRelease(d.Spec.Template, rel) })
	s.RollOut()
	return d
}

// resync plays an upgrade's last Job: db-sync runs again with the image of
// rel, loading its metadefs, and succeeds.
func (s *scene) resync(rel string) {
	s.t.Helper()
	s.Eventually("a db-sync Job with the image of "+rel, func() bool {
		return runsRelease(s.Job("glance-db-sync").Spec.Template, rel)
	}, nil)
	s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
}

// runsRelease says whether the pod template's first container runs the
// image of rel.
func runsRelease(tpl corev1.PodTemplateSpec, rel string) bool {
	return strings.HasSuffix(tpl.Spec.Containers[0].Image, ":"+rel)
}

func release(rel string) func(*v1alpha1.Glance) {
	return func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease, g.Spec.Image.Tag = rel, rel }
}

// events waits until the Glance's events include every reason, in order of
// first appearance.
func (s *scene) events(reasons ...string) {
	s.t.Helper()
	var got []string
	s.Eventually("events "+strings.Join(reasons, ", "), func() bool {
		var list eventsv1.EventList
		if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
			return false
		}
		slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		got = nil
		for _, e := range list.Items {
			if e.Regarding.Kind == "Glance" && !slices.Contains(got, e.Reason) {
				got = append(got, e.Reason)
			}
		}
		i := 0
		for _, r := range got {
			if i < len(reasons) && r == reasons[i] {
				i++
			}
		}
		return i == len(reasons)
	}, func() string { return "got " + strings.Join(got, ", ") })
}

// eventsOnce checks that each of the transition events was emitted exactly
// once on the Glance: one Event object, never repeated into a series.
func (s *scene) eventsOnce(reasons ...string) {
	s.t.Helper()
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
		s.t.Fatal(err)
	}
	for _, reason := range reasons {
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Kind != "Glance" || e.Reason != reason {
				continue
			}
			n++
			if e.Series != nil && e.Series.Count > 1 {
				n += int(e.Series.Count) - 1
			}
		}
		if n != 1 {
			s.t.Errorf("event %s emitted %d times, want once", reason, n)
		}
	}
}

// syncRuns waits until the db-sync counter of the Glance with that result
// reaches n, and checks it stays there for a moment.
func (s *scene) syncRuns(result string, n float64) {
	s.t.Helper()
	c := s.Manager.Metrics.DBSync.Total.WithLabelValues("glance", s.NS, result)
	s.Eventually(fmt.Sprintf("glance_operator_db_sync_total{result=%q} = %v", result, n), func() bool {
		return testutil.ToFloat64(c) == n
	}, func() string { return fmt.Sprint(testutil.ToFloat64(c)) })
	time.Sleep(500 * time.Millisecond)
	if got := testutil.ToFloat64(c); got != n {
		s.t.Errorf("glance_operator_db_sync_total{result=%q} = %v, want %v", result, got, n)
	}
}

// install takes a fresh managed Glance to DatabaseSynced and
// DeploymentReady.
func (s *scene) install(muts ...func(*v1alpha1.Glance)) {
	s.t.Helper()
	s.ready(false)
	s.Glance(muts...)
	s.provision()
	s.FinishJob("glance-db-sync", true)
	s.Condition(v1alpha1.ConditionDatabaseReady, metav1.ConditionTrue, v1alpha1.ReasonDatabaseSynced)
	s.RollOut()
	s.Condition(v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady)
}
