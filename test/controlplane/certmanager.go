package controlplane

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// CertificatesGVR is cert-manager's Certificate resource.
var CertificatesGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// RenewCertificate marks a cert-manager Certificate for re-issuance the way
// `cmctl renew` does: it sets the Issuing condition to True with reason
// ManuallyTriggered on the status subresource.
func RenewCertificate(ctx context.Context, dyn dynamic.Interface, namespace, name string) error {
	crt, err := dyn.Resource(CertificatesGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	issuing := map[string]any{
		"type":               "Issuing",
		"status":             "True",
		"reason":             "ManuallyTriggered",
		"message":            "Certificate re-issuance manually triggered",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		"observedGeneration": crt.GetGeneration(),
	}
	conds, _, _ := unstructured.NestedSlice(crt.Object, "status", "conditions")
	replaced := false
	for i, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Issuing" {
			conds[i], replaced = issuing, true
		}
	}
	if !replaced {
		conds = append(conds, issuing)
	}
	if err := unstructured.SetNestedSlice(crt.Object, conds, "status", "conditions"); err != nil {
		return err
	}
	if _, err := dyn.Resource(CertificatesGVR).Namespace(namespace).UpdateStatus(ctx, crt, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("trigger issuance of Certificate %s/%s: %w", namespace, name, err)
	}
	return nil
}
