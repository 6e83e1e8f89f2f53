//go:build chaos

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/stack"
)

// TestChaosWebhookOutage stops glance-webhook, as when every webhook pod is
// gone: the API server refuses creates and spec updates of both kinds,
// naming the webhook it could not call, while a metadata-only update, the
// deletion of a Ready Glance with the operator's finalizer, and the
// deletion of its backend all complete.
func TestChaosWebhookOutage(t *testing.T) {
	s := newScene(t, "chaos-webhook-outage")
	g := s.install()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := stk.StopWebhook(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			if err := stk.StartWebhook(ctx); err != nil {
				t.Fatalf("start glance-webhook again: %v", err)
			}
		}
	}
	t.Cleanup(restart)

	refused := func(what string, err error, webhook string) {
		t.Helper()
		// The API server names the webhook it failed to call.
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || !strings.Contains(err.Error(), webhook) {
			t.Errorf("%s with the webhook down: %v, want it refused by %s", what, err, webhook)
		}
	}
	mutatingGlance := "mglances." + v1alpha1.GroupVersion.Group
	mutatingBackend := "mglancebackends." + v1alpha1.GroupVersion.Group
	other := s.newGlance()
	other.Name = "other"
	refused("creating a Glance", cl.Create(ctx, other), mutatingGlance)
	refused("updating a Glance's spec", s.tryUpdate(func(g *v1alpha1.Glance) { g.Spec.Region = "elsewhere" }), mutatingGlance)
	backend := &v1alpha1.GlanceBackend{}
	s.get("s3-primary", backend)
	extra := backend.DeepCopy()
	extra.ObjectMeta = s.newGlance().ObjectMeta
	extra.Name = "s3-archive"
	extra.Spec.IsDefault = false
	refused("creating a GlanceBackend", cl.Create(ctx, extra), mutatingBackend)

	// What leaves the spec as it is never reaches the webhooks.
	updateObj(s, "glance", &v1alpha1.Glance{}, func(g *v1alpha1.Glance) {
		if g.Annotations == nil {
			g.Annotations = map[string]string{}
		}
		g.Annotations["example.com/touched"] = "during-outage"
	})
	if err := cl.Delete(ctx, g); err != nil {
		t.Fatalf("delete the Glance with the webhook down: %v", err)
	}
	s.gone("the Glance, its finalizer released by the operator,", "glance", &v1alpha1.Glance{})
	for _, kind := range mariaDBKinds {
		s.gone(kind, "glance", mariaDBObject(kind))
	}
	s.events("FinalizingDatabase", "DatabaseFinalized")
	if err := cl.Delete(ctx, backend); err != nil {
		t.Fatalf("delete the GlanceBackend with the webhook down: %v", err)
	}
	s.gone("the GlanceBackend", "s3-primary", &v1alpha1.GlanceBackend{})

	restart()
	if err := stack.DryRunThroughWebhooks(ctx, cl, s.ns, "after-outage"); err != nil {
		t.Errorf("a create through the restarted webhook: %v", err)
	}
	var left v1alpha1.GlanceList
	if err := cl.List(ctx, &left, client.InNamespace(s.ns)); err != nil || len(left.Items) != 0 {
		t.Errorf("Glances left in %s: %d, %v", s.ns, len(left.Items), err)
	}
}
