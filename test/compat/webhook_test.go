package compat

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// judged is what the API server keeps of a webhook as the chart wrote it:
// everything but the client config, which envtest points at the in-process
// webhook.
type judged struct {
	Name                    string
	Rules                   []admissionregistrationv1.RuleWithOperations
	MatchConditions         []admissionregistrationv1.MatchCondition
	NamespaceSelector       *metav1.LabelSelector
	FailurePolicy           *admissionregistrationv1.FailurePolicyType
	SideEffects             *admissionregistrationv1.SideEffectClass
	TimeoutSeconds          *int32
	AdmissionReviewVersions []string
}

func mutatingJudged(c *admissionregistrationv1.MutatingWebhookConfiguration) []judged {
	var out []judged
	for _, w := range c.Webhooks {
		out = append(out, judged{w.Name, w.Rules, w.MatchConditions, w.NamespaceSelector, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions})
	}
	return out
}

func validatingJudged(c *admissionregistrationv1.ValidatingWebhookConfiguration) []judged {
	var out []judged
	for _, w := range c.Webhooks {
		out = append(out, judged{w.Name, w.Rules, w.MatchConditions, w.NamespaceSelector, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions})
	}
	return out
}

// TestWebhookConfigurationsKept: the API server stored the chart's webhook
// configurations with their rules, match conditions and selector: an older
// server drops a field it does not know without an error, and a dropped
// match condition would send every update, and every object being deleted,
// to the webhook.
func TestWebhookConfigurationsKept(t *testing.T) {
	ctx := context.Background()
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := cl.Get(ctx, client.ObjectKeyFromObject(mutating), &m); err != nil {
		t.Fatal(err)
	}
	if got, want := mutatingJudged(&m), mutatingJudged(mutating); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("MutatingWebhookConfiguration %s stored otherwise than rendered:\n  %s", m.Name, strings.Join(differences("webhooks", got, want), "\n  "))
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := cl.Get(ctx, client.ObjectKeyFromObject(validating), &v); err != nil {
		t.Fatal(err)
	}
	if got, want := validatingJudged(&v), validatingJudged(validating); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("ValidatingWebhookConfiguration %s stored otherwise than rendered:\n  %s", v.Name, strings.Join(differences("webhooks", got, want), "\n  "))
	}
	for _, c := range [][]judged{mutatingJudged(mutating), validatingJudged(validating)} {
		for _, w := range c {
			if len(w.MatchConditions) == 0 || w.NamespaceSelector == nil {
				t.Errorf("webhook %s renders without match conditions or namespace selector: the check above compares nothing", w.Name)
			}
		}
	}
}

// TestWebhookWarnsAndRejects: through this API server the client sees the
// webhook's warning and its rejection, the latter from the one-default rule,
// whose sibling lookup lists backends by the CRD's selectable field.
func TestWebhookWarnsAndRejects(t *testing.T) {
	ctx := context.Background()
	rec := &operatortest.WarningRecorder{}
	wcl, err := newClient(rec)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "webhook"
	if err := wcl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	g := fixtures.NewGlance(ns, "glance", "2025.2")
	g.Spec.Staging = &v1alpha1.StagingSpec{Unbounded: true}
	if err := wcl.Create(ctx, g); err != nil {
		t.Fatalf("create: %v", err)
	}
	warning := "spec.staging.unbounded: the staging and tasks-work volumes have no size limit; a large import can fill the node's disk, and the kubelet then evicts pods outside the PodDisruptionBudget"
	if got := rec.Texts(); !slices.Equal(got, []string{warning}) {
		t.Errorf("warnings %q, want %q", got, warning)
	}
	if g.Spec.Deployment == nil || len(g.Spec.Deployment.Resources.Requests) == 0 {
		t.Errorf("spec.deployment %+v: the mutating webhook's default resources missing", g.Spec.Deployment)
	}

	if err := wcl.Create(ctx, fixtures.NewBackend(ns, "first", "glance", true, "s3")); err != nil {
		t.Fatalf("first default backend: %v", err)
	}
	err = wcl.Create(ctx, fixtures.NewBackend(ns, "second", "glance", true, "s3"))
	want := `admission webhook "vglancebackends.glance.openstack.c5c3.io" denied the request: GlanceBackend.glance.openstack.c5c3.io "second" is invalid: ` +
		`spec.isDefault: Invalid value: true: GlanceBackend "first" is already the default store of Glance "glance"; unset its isDefault first`
	if err == nil || err.Error() != want {
		t.Fatalf("second default backend:\n  %v\nwant:\n  %s", err, want)
	}
	if !apierrors.IsInvalid(err) {
		t.Errorf("want an Invalid (422) error, got %v", err)
	}
}
