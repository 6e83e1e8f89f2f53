package check

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/pkg/admission/webhook"
)

// webhookMatch decides, as the API server does, whether a write goes to the
// webhooks at all: the match conditions the webhook configurations declare,
// compiled and evaluated with the API server's own CEL library.
type webhookMatch struct {
	matcher matchconditions.Matcher
}

func newWebhookMatch() webhookMatch {
	compiler := cel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	var expressions []cel.ExpressionAccessor
	for _, c := range webhook.MatchConditions() {
		expressions = append(expressions, &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression})
	}
	filter := compiler.CompileCondition(expressions, cel.OptionalVariableDeclarations{}, environment.StoredExpressions)
	return webhookMatch{matcher: matchconditions.NewMatcher(filter, ptr.To(admissionregistrationv1.Fail), "webhook", "check", webhook.ConfigurationName)}
}

// calls reports whether the API server would call the webhooks for this
// write of obj over old (nil on a create).
func (w webhookMatch) calls(ctx context.Context, gvk k8sschema.GroupVersionKind, op admission.Operation, obj, old *unstructured.Unstructured) (bool, error) {
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	gvr := k8sschema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resourceOf(gvk.Kind)}
	attrs := admission.NewAttributesRecord(obj, oldObj, gvk, obj.GetNamespace(), obj.GetName(), gvr, "", op, nil, false, nil)
	result := w.matcher.Match(ctx, &admission.VersionedAttributes{
		Attributes: attrs, VersionedKind: gvk,
		VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(oldObj),
	}, nil, nil)
	if result.Error != nil {
		return false, fmt.Errorf("evaluating the webhooks' match conditions: %w", result.Error)
	}
	return result.Matches, nil
}

// resourceOf is the plural resource of the two kinds check judges.
func resourceOf(kind string) string {
	if kind == "GlanceBackend" {
		return "glancebackends"
	}
	return "glances"
}
