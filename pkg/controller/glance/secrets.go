package glance

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
)

// SecretsPollInterval is how often the ESO secret gate is polled.
const SecretsPollInterval = 15 * time.Second

// reconcileSecrets gates on the secret store, then on the database and
// service-user credential Secrets it syncs, and digests the service-user
// password for the rollout annotation.
func reconcileSecrets(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	waiting := func(reason, msg string) (ctrl.Result, error) {
		pipeline.SetCondition(g, v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{RequeueAfter: SecretsPollInterval}, nil
	}

	kind, name := g.SecretStore()
	gvk, key := clusterSecretStoreGVK, client.ObjectKey{Name: name}
	if kind == v1alpha1.SecretStoreKindName {
		gvk, key = secretStoreGVK, client.ObjectKey{Namespace: g.Namespace, Name: name}
	}
	store, installed, found, err := getOptional(ctx, p.cluster, p.cluster.Client, gvk, key)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case !installed:
		return waiting(v1alpha1.ReasonSecretStoreNotReady, fmt.Sprintf("the External Secrets Operator API (%s %s) is not installed", gvk.GroupVersion(), gvk.Kind))
	case !found:
		return waiting(v1alpha1.ReasonSecretStoreNotReady, fmt.Sprintf("%s %q not found", kind, name))
	}
	if status, msg, _ := readyCondition(store); status != string(metav1.ConditionTrue) {
		if msg == "" {
			msg = "no Ready condition yet"
		}
		return waiting(v1alpha1.ReasonSecretStoreNotReady, fmt.Sprintf("%s %q is not Ready: %s", kind, name, msg))
	}

	db := g.Spec.Database.SecretRef
	dbKey := cmp.Or(db.Key, v1alpha1.DefaultDatabasePasswordKey)
	su := g.Spec.ServiceUser.SecretRef
	suKey := cmp.Or(su.Key, v1alpha1.DefaultServiceUserPasswordKey)
	// Both are read at once: each is a round trip to the API server when
	// its resourceVersion is new.
	var dbData, suData map[string]string
	var dbMsg, suMsg string
	if err := pipeline.Concurrently(
		func() (err error) {
			dbData, dbMsg, err = readSecretKeys(ctx, p, g.Namespace, db.Name, v1alpha1.DefaultDatabaseUsernameKey, dbKey)
			return err
		},
		func() (err error) {
			suData, suMsg, err = readSecretKeys(ctx, p, g.Namespace, su.Name, suKey)
			return err
		},
	); err != nil {
		return ctrl.Result{}, err
	}
	if dbMsg != "" {
		return waiting(v1alpha1.ReasonWaitingForDBCredentials, dbMsg)
	}
	p.dbUsername = dbData[v1alpha1.DefaultDatabaseUsernameKey]
	p.dbPassword = dbData[dbKey]
	if suMsg != "" {
		return waiting(v1alpha1.ReasonWaitingForServiceUserCredentials, suMsg)
	}
	p.authtokenHash = digest(suData[suKey])

	pipeline.SetCondition(g, v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable,
		fmt.Sprintf("%s %q is Ready; Secrets %q and %q hold their keys", kind, name, db.Name, su.Name))
	return ctrl.Result{}, nil
}

// digest is the hex sha256 of a value: what pod annotations carry so that a
// rotation rolls the pods, without the value itself.
func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// readSecretKeys reads a user Secret and returns the wanted keys.
// When the Secret or a key is missing it returns a message saying so, and
// whether an ExternalSecret is there to sync it. Values never appear in a
// message.
func readSecretKeys(ctx context.Context, p *pass, namespace, name string, keys ...string) (map[string]string, string, error) {
	var s corev1.Secret
	err := p.cluster.GetSecret(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		hint, err := externalSecretHint(ctx, p, namespace, name)
		return nil, fmt.Sprintf("Secret %q not found%s", name, hint), err
	}
	if err != nil {
		return nil, "", fmt.Errorf("get Secret %s/%s: %w", namespace, name, err)
	}
	out := make(map[string]string, len(keys))
	var missing []string
	for _, k := range keys {
		v, ok := s.Data[k]
		if !ok || len(v) == 0 {
			missing = append(missing, fmt.Sprintf("%q", k))
			continue
		}
		out[k] = string(v)
	}
	if len(missing) > 0 {
		hint, err := externalSecretHint(ctx, p, namespace, name)
		return nil, fmt.Sprintf("Secret %q lacks key %s%s", name, strings.Join(missing, ", "), hint), err
	}
	return out, "", nil
}

// externalSecretHint says whether an ExternalSecret syncs the Secret, and
// how it is doing.
func externalSecretHint(ctx context.Context, p *pass, namespace, secret string) (string, error) {
	installed, err := p.cluster.Serves(externalSecretGVK)
	if err != nil {
		return "", err
	}
	if !installed {
		return " (the External Secrets API is not installed, so no ExternalSecret syncs it)", nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(externalSecretGVK.GroupVersion().WithKind(externalSecretGVK.Kind + "List"))
	if err := p.cluster.Reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("list ExternalSecrets in %s: %w", namespace, err)
	}
	var syncing []string
	for i := range list.Items {
		es := &list.Items[i]
		target, _, _ := unstructured.NestedString(es.Object, "spec", "target", "name")
		if target == "" {
			target = es.GetName()
		}
		if target != secret {
			continue
		}
		status, msg, _ := readyCondition(es)
		switch {
		case status == string(metav1.ConditionTrue):
			syncing = append(syncing, fmt.Sprintf("ExternalSecret %q targets it and reports Ready", es.GetName()))
		case msg != "":
			syncing = append(syncing, fmt.Sprintf("ExternalSecret %q targets it but has not synced it (%s)", es.GetName(), msg))
		default:
			syncing = append(syncing, fmt.Sprintf("ExternalSecret %q targets it but has not synced it yet", es.GetName()))
		}
	}
	if len(syncing) == 0 {
		return fmt.Sprintf("; no ExternalSecret in namespace %s targets it", namespace), nil
	}
	sort.Strings(syncing)
	return "; " + strings.Join(syncing, "; "), nil
}
