package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// ConfigurationName names both webhook configurations.
const ConfigurationName = "glance-operator"

// ClientConfigFunc returns how the API server reaches the webhook at path:
// a Service in a cluster, a URL in a local run or a test.
type ClientConfigFunc func(path string) admissionregistrationv1.WebhookClientConfig

// MatchConditions keep the webhooks out of writes whose verdict cannot
// change: an update of an object being deleted (releasing the finalizer must
// work while the webhook is down), and an update that leaves the spec as it
// was (finalizers, labels, annotations). The spec is what admission judges.
func MatchConditions() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{
		{Name: "not-being-deleted", Expression: "!has(object.metadata.deletionTimestamp)"},
		{Name: "spec-changed", Expression: "request.operation != 'UPDATE' || object.spec != oldObject.spec"},
	}
}

// DefaultTimeoutSeconds bounds each admission call.
const DefaultTimeoutSeconds int32 = 10

// Configurations returns the mutating and validating webhook configurations
// of the four webhooks: CREATE and UPDATE only, and only for writes that can
// change a verdict (MatchConditions), so that a webhook outage never blocks
// deletion; failurePolicy Fail, so that no object skips validation.
func Configurations(clientConfig ClientConfigFunc) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	rules := func(resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{v1alpha1.GroupVersion.Group},
				APIVersions: []string{v1alpha1.GroupVersion.Version},
				Resources:   []string{resource},
				Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}}
	}
	common := func(path string) (admissionregistrationv1.WebhookClientConfig, *admissionregistrationv1.FailurePolicyType, *admissionregistrationv1.SideEffectClass, *int32) {
		return clientConfig(path), ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.SideEffectClassNone), ptr.To(DefaultTimeoutSeconds)
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName}}
	for _, w := range []struct{ name, resource, mutatePath, validatePath string }{
		{"glances", "glances", MutateGlancePath, ValidateGlancePath},
		{"glancebackends", "glancebackends", MutateGlanceBackendPath, ValidateGlanceBackendPath},
	} {
		cc, fail, none, timeout := common(w.mutatePath)
		mutating.Webhooks = append(mutating.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name:                    "m" + w.name + "." + v1alpha1.GroupVersion.Group,
			ClientConfig:            cc,
			Rules:                   rules(w.resource),
			FailurePolicy:           fail,
			SideEffects:             none,
			TimeoutSeconds:          timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         MatchConditions(),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		})
		cc, fail, none, timeout = common(w.validatePath)
		validating.Webhooks = append(validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    "v" + w.name + "." + v1alpha1.GroupVersion.Group,
			ClientConfig:            cc,
			Rules:                   rules(w.resource),
			FailurePolicy:           fail,
			SideEffects:             none,
			TimeoutSeconds:          timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         MatchConditions(),
		})
	}
	return mutating, validating
}
