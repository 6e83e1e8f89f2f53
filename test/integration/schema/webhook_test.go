package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	crdschema "github.com/c5c3/glance-operator/pkg/admission/schema"
)

// A test mutating webhook patches the objects labelled patchedLabel with the
// JSON patch in their annotation patchAnnotation+OPERATION, so that a case
// says what "the webhook" does to it and the offline side can do the same.
const (
	patchedLabel    = "schema-diff/patched"
	patchAnnotation = "schema-diff/patch-"
)

// webhookOptions registers the test webhook with the API server.
func webhookOptions() envtest.WebhookInstallOptions {
	return envtest.WebhookInstallOptions{
		MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "schema-diff"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "patch.schema-diff.test",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{
					Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "schema-diff", Path: ptr.To("mutate")},
				},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{
						APIGroups:   []string{"glance.openstack.c5c3.io"},
						APIVersions: []string{"v1alpha1"},
						Resources:   []string{"glances", "glancebackends"},
					},
				}},
				ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: patchedLabel, Operator: metav1.LabelSelectorOpExists},
				}},
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}},
	}
}

// startWebhook serves the test webhook where envtest pointed the API server.
func startWebhook(ctx context.Context, opts envtest.WebhookInstallOptions) error {
	srv := webhook.NewServer(webhook.Options{Host: opts.LocalServingHost, Port: opts.LocalServingPort, CertDir: opts.LocalServingCertDir})
	srv.Register("/mutate", &webhook.Admission{Handler: admission.HandlerFunc(patchFromAnnotation)})
	go func() { _ = srv.Start(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := srv.StartedChecker()(&http.Request{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server did not start: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func patchFromAnnotation(_ context.Context, req admission.Request) admission.Response {
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	patch, ok := obj.Metadata.Annotations[patchAnnotation+string(req.Operation)]
	if !ok {
		return admission.Allowed("")
	}
	resp := admission.Allowed("")
	resp.Patch = []byte(patch)
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	return resp
}

// patchOn makes the test webhook apply the JSON patch on operation (CREATE
// or UPDATE).
func patchOn(operation, patch string) mutation {
	return func(m map[string]any) {
		u := unstructured.Unstructured{Object: m}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[patchedLabel] = "yes"
		u.SetLabels(labels)
		annotations := u.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[patchAnnotation+operation] = patch
		u.SetAnnotations(annotations)
	}
}

// offlineWebhook does offline what the test webhook and the API server do to
// a decoded object on operation: apply the patch, then decode and default
// again (crdschema.Kind.Default).
func offlineWebhook(t *testing.T, kind *crdschema.Kind, obj map[string]any, operation string) map[string]any {
	t.Helper()
	annotations, _ := obj["metadata"].(map[string]any)["annotations"].(map[string]any)
	patch, ok := annotations[patchAnnotation+operation].(string)
	if !ok {
		return obj
	}
	p, err := jsonpatch.DecodePatch([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err = p.Apply(doc); err != nil {
		t.Fatalf("apply the webhook patch offline: %v", err)
	}
	var patched map[string]any
	if err := json.Unmarshal(doc, &patched); err != nil {
		t.Fatal(err)
	}
	defaulted, err := kind.Default(patched)
	if err != nil {
		t.Fatal(err)
	}
	return defaulted
}

func TestOfflineMatchesServerAfterWebhook(t *testing.T) {
	cases := []diffCase{
		{name: "webhook removes defaulted fields", obj: glance("wh-redefault",
			patchOn("CREATE", `[{"op":"remove","path":"/spec/database/port"},{"op":"add","path":"/spec/deployment","value":{"replicas":2}}]`)), want: accepted},
		{name: "webhook nulls a defaulted field", obj: glance("wh-null-default",
			patchOn("CREATE", `[{"op":"replace","path":"/spec/database/port","value":null}]`)), want: accepted},
		{name: "webhook nulls a field without default", obj: glance("wh-null",
			patchOn("CREATE", `[{"op":"add","path":"/spec/region","value":null}]`)), want: invalid},
		{name: "webhook breaks a bound", obj: glance("wh-port",
			patchOn("CREATE", `[{"op":"replace","path":"/spec/database/port","value":0}]`)), want: invalid},
		{name: "webhook breaks an enum", obj: glance("wh-enum",
			patchOn("CREATE", `[{"op":"add","path":"/spec/logging","value":{"format":"yaml"}}]`)), want: invalid},
		{name: "webhook duplicates a list-map key", obj: glance("wh-dup",
			patchOn("CREATE", `[{"op":"add","path":"/spec/middleware","value":[{"name":"a","filterFactory":"m:f"},{"name":"a","filterFactory":"m:g"}]}]`)), want: invalid},
		{name: "webhook breaks a CEL rule", obj: glance("wh-cel",
			patchOn("CREATE", `[{"op":"add","path":"/spec/image/digest","value":"sha256:`+fmt.Sprintf("%064d", 0)+`"}]`)), want: invalid},
		{name: "webhook breaks a transition rule", obj: glance("wh-transition",
			patchOn("UPDATE", `[{"op":"add","path":"/spec/targetClusterRef","value":{"name":"region-two"}}]`)),
			update: []mutation{set("spec.region", "RegionTwo")}, want: invalid},
		{name: "webhook removes a defaulted field on update", obj: glance("wh-update",
			set("spec.deployment", "{replicas: 2}"),
			patchOn("UPDATE", `[{"op":"remove","path":"/spec/deployment/preStopSleepSeconds"}]`)),
			update: []mutation{set("spec.region", "RegionTwo")}, want: accepted},
	}
	runDiffCases(t, cases)
}
