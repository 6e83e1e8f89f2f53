package glance

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
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
	if p.digestKey, err = ensureDigestKey(ctx, p, g); err != nil {
		return ctrl.Result{}, err
	}
	p.authtokenHash = keyedDigest(p.digestKey, suData[suKey])

	pipeline.SetCondition(g, v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable,
		fmt.Sprintf("%s %q is Ready; Secrets %q and %q hold their keys", kind, name, db.Name, su.Name))
	return ctrl.Result{}, nil
}

// digest is the hex sha256 of a value that holds no secret.
func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// keyedDigest is the hex HMAC-SHA256 of a secret value under the Glance's
// digest key: what pod annotations carry so that a rotation rolls the pods.
// Whoever can read a pod template cannot test guesses of the value against
// it without the key.
func keyedDigest(key []byte, v string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(v))
	return hex.EncodeToString(mac.Sum(nil))
}

// DigestKeyKey is the key of the digest key in the {name}-digest-key Secret.
const DigestKeyKey = "key"

// digestKeySize is the length of a digest key: HMAC-SHA256's output size,
// as strong as the digest itself.
const digestKeySize = sha256.Size

// ensureDigestKey returns the key of the Glance's keyed digests, from the
// {name}-digest-key Secret beside its children. The first pass creates that
// Secret with a random key, immutable; it is never rewritten, so digests
// change only with the values they digest. Deleting it makes a new key, and
// rolls the pods once.
func ensureDigestKey(ctx context.Context, p *pass, g *v1alpha1.Glance) ([]byte, error) {
	name := render.DigestKeySecretName(g.Name)
	// Drawn on every pass, used on the first: 32 random bytes cost less
	// than a second path to the child. rand.Read never fails; the program
	// ends if it cannot read randomness.
	fresh := make([]byte, digestKeySize)
	rand.Read(fresh)
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Namespace, Labels: childLabels(g, componentDigestKey)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       map[string][]byte{DigestKeyKey: fresh},
	}
	var s corev1.Secret
	if _, err := getOrCreate(ctx, p, g, desired, &s); err != nil {
		return nil, fmt.Errorf("the digest key Secret: %w", err)
	}
	if k := s.Data[DigestKeyKey]; len(k) >= digestKeySize {
		return k, nil
	}
	return nil, fmt.Errorf("Secret %s holds no %q key of at least %d bytes; delete it and the operator makes a new key (the pods roll once)", name, DigestKeyKey, digestKeySize)
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
