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

// Configurations returns the mutating and validating webhook configurations
// of the four webhooks: CREATE and UPDATE only, so that a webhook outage
// never blocks deletion, and failurePolicy Fail, so that no object skips
// validation.
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
		return clientConfig(path), ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.SideEffectClassNone), ptr.To[int32](10)
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
		})
	}
	return mutating, validating
}
