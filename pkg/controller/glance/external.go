package glance

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// The external APIs the operator talks to through unstructured objects, so
// that it has no Go dependency on them and runs without them installed.
var (
	clusterSecretStoreGVK = schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ClusterSecretStore"}
	secretStoreGVK        = schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "SecretStore"}
	externalSecretGVK     = schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"}
)

// readyCondition returns the status and message of an object's Ready
// condition, and false when it has none.
func readyCondition(u *unstructured.Unstructured) (status, message string, found bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ = m["status"].(string)
		message, _ = m["message"].(string)
		if reason, _ := m["reason"].(string); reason != "" && message != "" {
			message = reason + ": " + message
		} else if reason != "" {
			message = reason
		}
		return status, message, true
	}
	return "", "", false
}

// getOptional reads an object of an optional API. installed is false when
// the cluster does not serve the kind; found is false when the object does
// not exist.
func getOptional(ctx context.Context, c *targetcluster.Cluster, reader client.Reader, gvk schema.GroupVersionKind, key client.ObjectKey) (u *unstructured.Unstructured, installed, found bool, err error) {
	installed, err = c.Serves(gvk)
	if err != nil || !installed {
		return nil, installed, false, err
	}
	u = &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := reader.Get(ctx, key, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, false, nil
		}
		return nil, true, false, fmt.Errorf("get %s %s: %w", gvk.Kind, key, err)
	}
	return u, true, true, nil
}
