package glance

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
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
	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
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

	// The digest key comes first: the credentials are derived as keyed
	// digests under it.
	if p.digestKey, err = ensureDigestKey(ctx, p, g); err != nil {
		return ctrl.Result{}, err
	}
	if err := deriveCredentials(ctx, g, p); err != nil {
		return ctrl.Result{}, err
	}
	db, su := g.Spec.Database.SecretRef, g.Spec.ServiceUser.SecretRef
	if msg, err := credentialsMessage(ctx, p, g.Namespace, db.Name, p.credentials.db); err != nil || msg != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		return waiting(v1alpha1.ReasonWaitingForDBCredentials, msg)
	}
	if msg, err := credentialsMessage(ctx, p, g.Namespace, su.Name, p.credentials.serviceUser); err != nil || msg != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		return waiting(v1alpha1.ReasonWaitingForServiceUserCredentials, msg)
	}

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
//
// The key is the one value of a child Secret the manager keeps in memory:
// it is no user's credential but the operator's own random key, and every
// pass needs it to digest what it compares. The cache holds the Secret's
// metadata only; its data is read from the API server once per version of
// it (targetcluster.Cluster.Remember keeps the key, and nothing else of
// it).
func ensureDigestKey(ctx context.Context, p *pass, g *v1alpha1.Glance) ([]byte, error) {
	name := render.DigestKeySecretName(g.Name)
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Namespace, Labels: childLabels(g, componentDigestKey)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
	}
	fresh := make([]byte, digestKeySize)
	existing := secretMetadata()
	created, err := getOrCreate(ctx, p, g, desired, existing, func() error {
		// Drawn for the Secret's creation only. rand.Read never fails; the
		// program ends if it cannot read randomness.
		rand.Read(fresh)
		desired.Data = map[string][]byte{DigestKeyKey: fresh}
		return nil
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("the digest key Secret: %w", err)
	case created:
		p.cluster.Remember(existing, knownDigestKey, fresh)
		return fresh, nil
	}
	if k, ok := p.cluster.Known(existing, knownDigestKey); ok {
		return k.([]byte), nil
	}
	var s corev1.Secret
	if err := p.cluster.Reader.Get(ctx, client.ObjectKeyFromObject(desired), &s); err != nil {
		return nil, fmt.Errorf("the digest key Secret: get Secret %s: %w", name, err)
	}
	k := s.Data[DigestKeyKey]
	if len(k) < digestKeySize {
		return nil, fmt.Errorf("Secret %s holds no %q key of at least %d bytes; delete it and the operator makes a new key (the pods roll once)", name, DigestKeyKey, digestKeySize)
	}
	p.cluster.Remember(&s, knownDigestKey, k)
	return k, nil
}

// knownDigestKey names the key of the digest key Secret in
// targetcluster.Cluster.Known.
const knownDigestKey = "digest-key"

// credentials is what the Secrets step derives from the database and
// service-user Secrets, kept between passes (targetcluster.Derive). It holds
// no secret value: the DSN and the service-user password are there as keyed
// digests only.
type credentials struct {
	db, serviceUser credentialKeys
	// username is the database user, which the MariaDB User names.
	username string
	// dsnError is why no DSN can be built; it quotes no value.
	dsnError string
	// dsnHash and authtokenHash are the keyed digests of the DSN and the
	// service-user password.
	dsnHash, authtokenHash string
	// dsnHashB is the keyed digest of the DSN of database user slot b
	// (database.Slot) with the same password, where the operator makes
	// the database users; slot a's is dsnHash.
	dsnHashB string
	// dbPasswordHash is the keyed digest of the database password.
	dbPasswordHash string
}

// slotDSNHash is the keyed digest of the DSN of slot s's user with the
// credentials' password.
func (c credentials) slotDSNHash(s database.Slot) string {
	if s == database.SlotB {
		return c.dsnHashB
	}
	return c.dsnHash
}

// credentialKeys is what a read found of a credential Secret.
type credentialKeys struct {
	found bool
	// missing are the wanted keys it lacks, quoted.
	missing []string
}

// dsnShapeUser and dsnShapePassword stand in for the credentials in the DSN
// a spec makes, which the derivation depends on besides the Secrets.
const dsnShapeUser, dsnShapePassword = "\x00user", "\x00password"

// dsnShape is the DSN g's spec makes, with stand-ins for the credentials,
// or why it makes none.
func dsnShape(g *v1alpha1.Glance) string {
	shape, err := render.DSN(g, dsnShapeUser, dsnShapePassword)
	if err != nil {
		return err.Error()
	}
	return shape
}

// credentialsDerivation names the derivation of a Glance's credentials.
func credentialsDerivation(g *v1alpha1.Glance) string {
	return "glance/" + g.Namespace + "/" + g.Name + "/credentials"
}

// deriveCredentials derives p.credentials from the database and
// service-user Secrets, reading them only when they, the spec's DSN or the
// digest key changed since the last derivation. A pass that read them has
// the database password in p.dbPassword, until the pass ends.
func deriveCredentials(ctx context.Context, g *v1alpha1.Glance, p *pass) error {
	c, password, err := readCredentials(ctx, g, p)
	if err != nil {
		return err
	}
	p.credentials = c
	if password != "" {
		p.dbPassword = password
	}
	return nil
}

// readCredentials is the derivation of deriveCredentials, and the database
// password when the Secrets were read for it (empty when it was kept).
func readCredentials(ctx context.Context, g *v1alpha1.Glance, p *pass) (credentials, string, error) {
	db, su := g.Spec.Database.SecretRef, g.Spec.ServiceUser.SecretRef
	userKey := v1alpha1.DefaultDatabaseUsernameKey
	dbKey := cmp.Or(db.Key, v1alpha1.DefaultDatabasePasswordKey)
	suKey := cmp.Or(su.Key, v1alpha1.DefaultServiceUserPasswordKey)
	// The Secret names the service user only when the spec asks for it:
	// another key it happens to hold changes nothing.
	suUserKey := g.Spec.ServiceUser.UsernameKey
	suKeys := []string{suKey}
	if suUserKey != "" {
		suKeys = append(suKeys, suUserKey)
	}
	// The digest key enters as the digest of a constant under it: what
	// tells keys apart without showing one.
	inputs := strings.Join([]string{dbKey, suKey, suUserKey, dsnShape(g), strconv.FormatBool(makesDatabaseUsers(g)), keyedDigest(p.digestKey, "credentials")}, "\x00")
	keys := []client.ObjectKey{{Namespace: g.Namespace, Name: db.Name}, {Namespace: g.Namespace, Name: su.Name}}
	var password string
	c, fresh, err := targetcluster.Derive(ctx, p.cluster, credentialsDerivation(g), inputs, keys, func(reads []targetcluster.SecretRead) (credentials, error) {
		var c credentials
		dbValues, err := credentialValues(reads[0], &c.db, userKey, dbKey)
		if err != nil {
			return credentials{}, err
		}
		suValues, err := credentialValues(reads[1], &c.serviceUser, suKeys...)
		if suUserKey != "" {
			// Say which field asks for it: a key the Secret need not hold
			// unless the spec names it.
			if i := slices.Index(c.serviceUser.missing, strconv.Quote(suUserKey)); i >= 0 {
				c.serviceUser.missing[i] += " (spec.serviceUser.usernameKey)"
			}
		}
		if err != nil || dbValues == nil || suValues == nil {
			return c, err
		}
		c.username, password = dbValues[userKey], dbValues[dbKey]
		c.dbPasswordHash = keyedDigest(p.digestKey, password)
		if err := database.CheckUsername(c.username); err != nil && makesDatabaseUsers(g) {
			c.dsnError = fmt.Sprintf("key %q of Secret %q: %v", userKey, db.Name, err)
		} else if dsn, err := render.DSN(g, c.username, password); err != nil {
			c.dsnError = err.Error()
		} else {
			c.dsnHash = keyedDigest(p.digestKey, dsn)
			if makesDatabaseUsers(g) {
				// The user only differs, which the DSN escapes.
				dsnB, _ := render.DSN(g, database.SlotB.Username(c.username), password)
				c.dsnHashB = keyedDigest(p.digestKey, dsnB)
			}
		}
		c.authtokenHash = keyedDigest(p.digestKey, suValues[suKey])
		if suUserKey != "" {
			// The pods take the user from the Secret too: a switch to
			// another user rolls them.
			c.authtokenHash = keyedDigest(p.digestKey, suValues[suUserKey]+"\x00"+suValues[suKey])
		}
		return c, nil
	})
	if err != nil {
		return credentials{}, "", err
	}
	if !fresh {
		password = ""
	}
	return c, password, nil
}

// credentialValues returns the wanted keys of a credential Secret read, and
// records in k what the read found; nil when the Secret or a key is
// missing.
func credentialValues(read targetcluster.SecretRead, k *credentialKeys, keys ...string) (map[string]string, error) {
	if apierrors.IsNotFound(read.Err) {
		return nil, nil
	}
	if read.Err != nil {
		return nil, fmt.Errorf("get Secret %s: %w", read.Key, read.Err)
	}
	k.found = true
	out := make(map[string]string, len(keys))
	for _, key := range keys {
		v := read.Secret.Data[key]
		if len(v) == 0 {
			k.missing = append(k.missing, strconv.Quote(key))
			continue
		}
		out[key] = string(v)
	}
	if len(k.missing) > 0 {
		return nil, nil
	}
	return out, nil
}

// credentialsMessage says what a credential Secret lacks, and whether an
// ExternalSecret is there to sync it; empty when it holds its keys. Values
// never appear in a message.
func credentialsMessage(ctx context.Context, p *pass, namespace, name string, k credentialKeys) (string, error) {
	var msg string
	switch {
	case !k.found:
		msg = fmt.Sprintf("Secret %q not found", name)
	case len(k.missing) > 0:
		msg = fmt.Sprintf("Secret %q lacks key %s", name, strings.Join(k.missing, ", "))
	default:
		return "", nil
	}
	hint, err := externalSecretHint(ctx, p, namespace, name)
	return msg + hint, err
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
