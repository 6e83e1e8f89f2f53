package e2e

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// replicaSets counts the ReplicaSets of the Glance's Deployment: one per
// pod template it has rolled out.
func (s *scene) replicaSets() int {
	s.t.Helper()
	d := s.deployment()
	var list appsv1.ReplicaSetList
	if err := cl.List(context.Background(), &list, client.InNamespace(s.ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		s.t.Fatal(err)
	}
	return len(list.Items)
}

// TestForeignChangesSurvive: kubectl rollout restart rolls the pods once and
// the operator's next write (a replica change) does not roll them again; an
// annotation and a label others put on the children (a backup tool, a
// service mesh, kubectl annotate) stay through the operator's writes.
func TestForeignChangesSurvive(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-foreign")
	s.install(func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = ptr.To[int32](2) })
	s.podsRunning(2)
	before := s.replicaSets()

	kubectl(t, "-n", s.ns, "rollout", "restart", "deployment/glance")
	kubectl(t, "-n", s.ns, "rollout", "status", "deployment/glance", "--timeout=120s")
	s.eventually("one new ReplicaSet for the restart", func() (bool, string) {
		n := s.replicaSets()
		return n == before+1, fmt.Sprintf("%d ReplicaSets, %d before", n, before)
	})
	restartedAt := s.deployment().Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]
	if restartedAt == "" {
		t.Fatal("kubectl rollout restart left no restartedAt annotation")
	}
	kubectl(t, "-n", s.ns, "annotate", "deployment/glance", "backup.example.com/policy=nightly")
	kubectl(t, "-n", s.ns, "label", "deployment/glance", "mesh.example.com/member=true")
	kubectl(t, "-n", s.ns, "annotate", "service/glance", "mesh.example.com/port=api")

	// A write of the Deployment that changes no pod template.
	s.update(func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = ptr.To[int32](3) })
	s.podsRunning(3)
	d := s.deployment()
	if ptr.Deref(d.Spec.Replicas, 0) != 3 {
		t.Fatalf("the Deployment has %d replicas, want 3", ptr.Deref(d.Spec.Replicas, 0))
	}
	if got := d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]; got != restartedAt {
		t.Errorf("restartedAt %q after the operator's write, want %q kept", got, restartedAt)
	}
	if n := s.replicaSets(); n != before+1 {
		t.Errorf("%d ReplicaSets after the replica change, want %d: the operator's write rolled the pods again", n, before+1)
	}
	if d.Annotations["backup.example.com/policy"] != "nightly" || d.Labels["mesh.example.com/member"] != "true" {
		t.Errorf("the Deployment lost others' metadata: annotations %v, labels %v", d.Annotations, d.Labels)
	}
	var svc corev1.Service
	s.get("glance", &svc)
	if svc.Annotations["mesh.example.com/port"] != "api" {
		t.Errorf("the Service lost others' annotation: %v", svc.Annotations)
	}
}
