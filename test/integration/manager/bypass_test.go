package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// This suite runs without the webhooks: the objects below bypassed
// admission, and the controller judges them by the same rules.

func TestRefusedReleaseRendersNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Glance(func(g *v1alpha1.Glance) { g.Spec.OpenStackRelease = "2009.1" })
	c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
	if !strings.Contains(c.Message, "spec.openStackRelease") || !strings.Contains(c.Message, "older than 2010.1") {
		t.Errorf("SecretsReady message %q, want the release rule", c.Message)
	}
	e.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	// The backend's projection would have rendered a backends Secret by now
	// if the pipeline had run.
	time.Sleep(time.Second)
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &appsv1.DeploymentList{}, &batchv1.JobList{}} {
		if err := cl.List(context.Background(), list, client.InNamespace(e.NS), client.MatchingLabels(render.CommonLabels("glance"))); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("a refused spec rendered %d objects: %T", n, list)
		}
	}
	if g := e.ReadGlance(); len(g.Finalizers) != 0 {
		t.Errorf("a refused Glance that never rendered holds finalizers %v", g.Finalizers)
	}
}

func TestRefusedConfigKeepsTheLastGoodOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Glance()
	e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
	// SecretsReady is True from the Secrets step on; the config is rendered
	// once the backend has projected, maybe a pass later.
	var configs []string
	e.Eventually("one config ConfigMap", func() bool {
		configs = e.Names(&corev1.ConfigMapList{}, "config")
		return len(configs) == 1
	}, func() string { return fmt.Sprint(configs) })

	e.UpdateGlance(func(g *v1alpha1.Glance) {
		g.Spec.ExtraConfig = map[string]map[string]string{"oslo_policy": {"policy_default_rule": "admin\u202e"}}
	})
	c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
	if !strings.Contains(c.Message, "spec.extraConfig[oslo_policy][policy_default_rule]") || !strings.Contains(c.Message, "U+202E") {
		t.Errorf("SecretsReady message %q, want the entry and the character", c.Message)
	}
	if after := e.Names(&corev1.ConfigMapList{}, "config"); len(after) != 1 || after[0] != configs[0] {
		t.Errorf("config ConfigMaps %v after a refused spec, want the last good %v alone", after, configs)
	}
}

func TestRefusedBackendIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	beta := fixtures.NewBackend(e.NS, "beta", "glance", false, "s3")
	beta.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"s3_store_host": "http://elsewhere"}
	e.Create(beta)
	e.Glance()
	// The first AllBackendsProjected may still wait for beta's credentials:
	// the backend controller judges beta on its own time.
	e.ConditionSaying(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected, "skipped beta")
	var events eventsv1.EventList
	e.Eventually("a GlanceBackendSkipped event naming the rule", func() bool {
		if err := cl.List(ctx, &events, client.InNamespace(e.NS)); err != nil {
			return false
		}
		for _, ev := range events.Items {
			if ev.Reason == "GlanceBackendSkipped" && strings.Contains(ev.Note, `backend "beta" skipped: it breaks admission rules: spec.extraOptions[s3_store_host]`) {
				return true
			}
		}
		return false
	}, func() string { return "events: " + eventNotes(events) })
}
