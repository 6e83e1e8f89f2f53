package glance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// Components of the content-addressed children, for retention.
const (
	componentConfig   = "config"
	componentBackends = "backends"
	componentDatabase = render.ComponentDatabase
	// componentDigestKey is the Secret of the key of the pod template's
	// digests.
	componentDigestKey = "digest-key"
)

// historyKept is how many earlier content-addressed ConfigMaps and Secrets
// are kept besides the current one and those in use, for a quick rollback.
const historyKept = 3

func childLabels(g *v1alpha1.Glance, component string) map[string]string {
	return render.ChildLabels(g.Name, component)
}

// ensureImmutable creates a content-addressed, immutable child of component
// unless it exists (equal names mean equal content), then prunes the
// component's history, of list's kind, keeping it and those in use. A
// Secret's history is listed as metadata (pass a
// metav1.PartialObjectMetadataList of Secrets). obj holds what the server
// answered when this call created it.
func ensureImmutable(ctx context.Context, p *pass, g *v1alpha1.Glance, obj client.Object, list client.ObjectList, component string, inUse []string) error {
	if _, err := getOrCreate(ctx, p, g, obj, cachedForm(obj), nil); err != nil {
		return err
	}
	return pruneHistory(ctx, p, g, list, component, append([]string{obj.GetName()}, inUse...))
}

// cachedForm is an empty object of obj's kind as the caches hold it: a
// Secret's metadata (targetcluster.NewCache), or obj's own type.
func cachedForm(obj client.Object) client.Object {
	if _, ok := obj.(*corev1.Secret); ok {
		return secretMetadata()
	}
	return obj.DeepCopyObject().(client.Object)
}

// secretMetadata is an empty Secret to read as metadata, as the caches
// hold Secrets.
func secretMetadata() *metav1.PartialObjectMetadata {
	return metadataOf("", "v1", "Secret")
}

// secretMetadataList is an empty list of Secrets to read as metadata.
func secretMetadataList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	return l
}

// AnnotationDataHash is the keyed digest (under the Glance's digest key)
// of the data of a child Secret ensureSecret writes: what tells, from the
// cached metadata, whether it holds what a pass would write.
const AnnotationDataHash = "glance.openstack.c5c3.io/data-hash"

// secretData is the desired data of a child Secret: the keyed digest of
// each value, which decides whether to write, and the values, made only
// for a write, as making them may read credentials from the API server.
type secretData struct {
	digests map[string]string
	values  func(context.Context) (map[string][]byte, error)
}

// knownDigests names, in targetcluster.Cluster.Known, the keyed digests of
// each value a child Secret holds under the digest key whose fingerprint
// follows.
const knownDigests = "digests/"

// ensureSecret makes the named Secret hold exactly the data of want,
// writing only when something differs. It decides without the values: the
// Secret's AnnotationDataHash against the digest of want, and, for a
// version of the Secret the operator neither wrote nor read before, the
// digests of what it holds, read once from the API server (which catches a
// value edited by hand). The values are made only for a write, and the
// operator keeps only their digests.
func ensureSecret(ctx context.Context, p *pass, g *v1alpha1.Glance, name, component string, want secretData) error {
	hash := secretDigest(p.digestKey, want.digests)
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: g.Namespace, Labels: childLabels(g, component),
			Annotations: map[string]string{AnnotationDataHash: hash},
		},
		Type: corev1.SecretTypeOpaque,
	}
	existing := secretMetadata()
	var readErr error
	wrote := false
	err := applyChild(ctx, p, g, desired, existing, func() bool {
		if existing.Annotations[AnnotationDataHash] != hash {
			// Another Secret's data, or one of an earlier operator's, which
			// is written to carry the annotation: no need to read it.
			return false
		}
		held, err := childDigests(ctx, p, existing)
		readErr = err
		return err == nil && secretDigest(p.digestKey, held) == hash
	}, func() error {
		if readErr != nil {
			return readErr
		}
		values, err := want.values(ctx)
		if err != nil {
			return err
		}
		if valuesDigest(p.digestKey, values) != hash {
			// What was read to write differs from what the pass decided
			// on: the credentials changed since, and their watch event
			// brings the next pass.
			return errCredentialsChanged
		}
		desired.Data, wrote = values, true
		return nil
	})
	if err == nil && wrote {
		// existing is what the write answered: the version that holds
		// want, which need not be read.
		p.cluster.Remember(existing, knownDigests+keyFingerprint(p.digestKey), want.digests)
	}
	return err
}

// errCredentialsChanged is why a pass stops that found the credentials
// changed while it ran; their watch event brings the next pass.
var errCredentialsChanged = errors.New("the database credentials changed during the pass")

// childDigests are the keyed digests of each value the child Secret m (its
// cached metadata) holds: known from the operator's own write or an
// earlier read of the same version, else read from the API server, which
// are kept and the values not. A Secret gone since holds nothing.
func childDigests(ctx context.Context, p *pass, m *metav1.PartialObjectMetadata) (map[string]string, error) {
	what := knownDigests + keyFingerprint(p.digestKey)
	if v, ok := p.cluster.Known(m, what); ok {
		return v.(map[string]string), nil
	}
	var s corev1.Secret
	err := p.cluster.Reader.Get(ctx, client.ObjectKeyFromObject(m), &s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get Secret %s: %w", m.Name, err)
	}
	digests := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		digests[k] = keyedDigest(p.digestKey, string(v))
	}
	p.cluster.Remember(&s, what, digests)
	return digests, nil
}

// secretDigest is the keyed digest of a Secret's data given the keyed
// digest of each value: what AnnotationDataHash holds.
func secretDigest(key []byte, digests map[string]string) string {
	keys := slices.Sorted(maps.Keys(digests))
	var b strings.Builder
	for _, k := range keys {
		// Length prefixes keep the keys and digests apart.
		fmt.Fprintf(&b, "%d:%s%d:%s", len(k), k, len(digests[k]), digests[k])
	}
	return keyedDigest(key, b.String())
}

// valuesDigest is secretDigest of the values.
func valuesDigest(key []byte, values map[string][]byte) string {
	digests := make(map[string]string, len(values))
	for k, v := range values {
		digests[k] = keyedDigest(key, string(v))
	}
	return secretDigest(key, digests)
}

// keyFingerprint tells digest keys apart without showing one: what is
// known under one key is not compared with digests under another.
func keyFingerprint(key []byte) string {
	return keyedDigest(key, "fingerprint")[:16]
}

// liveNames are the config ConfigMap and backends Secret the Deployment runs
// with: the last good ones, kept when a new projection is invalid.
type liveNames struct {
	configMap, backendsSecret string
	// configMaps and backendsSecrets are those in use: the Deployment's, and
	// those that a Job of the Glance that has not finished (a schema Job, a
	// purge run) or the purge CronJob mounts. Pruning one would leave a pod
	// not yet started, or a retry, unable to mount its volume forever.
	configMaps, backendsSecrets []string
}

func readLiveNames(ctx context.Context, p *pass, g *v1alpha1.Glance) (liveNames, error) {
	var live liveNames
	var d appsv1.Deployment
	err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, &d)
	switch {
	case err == nil:
		live.configMap, live.backendsSecret = render.MountedNames(d.Spec.Template.Spec)
		live.add(live.configMap, live.backendsSecret)
	case !apierrors.IsNotFound(err):
		return liveNames{}, fmt.Errorf("get Deployment %s: %w", g.Name, err)
	}
	var jobs batchv1.JobList
	if err := p.cluster.Client.List(ctx, &jobs, client.InNamespace(g.Namespace), client.MatchingLabels(render.CommonLabels(g.Name))); err != nil {
		return liveNames{}, fmt.Errorf("list Jobs: %w", err)
	}
	for i := range jobs.Items {
		if j := &jobs.Items[i]; !jobFinished(j) {
			live.add(render.MountedNames(j.Spec.Template.Spec))
		}
	}
	var cj batchv1.CronJob
	err = p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: render.DBPurgeCronJobName(g.Name)}, &cj)
	switch {
	case err == nil:
		live.add(render.MountedNames(cj.Spec.JobTemplate.Spec.Template.Spec))
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return liveNames{}, fmt.Errorf("get CronJob %s: %w", cj.Name, err)
	}
	return live, nil
}

func (l *liveNames) add(configMap, backendsSecret string) {
	if configMap != "" && !slices.Contains(l.configMaps, configMap) {
		l.configMaps = append(l.configMaps, configMap)
	}
	if backendsSecret != "" && !slices.Contains(l.backendsSecrets, backendsSecret) {
		l.backendsSecrets = append(l.backendsSecrets, backendsSecret)
	}
}

// pruneHistory deletes the content-addressed children of a component beyond
// those in keep (the current one and those in use) and the historyKept
// newest others.
func pruneHistory(ctx context.Context, p *pass, g *v1alpha1.Glance, list client.ObjectList, component string, keep []string) error {
	if err := p.cluster.Client.List(ctx, list, client.InNamespace(g.Namespace), client.MatchingFields{v1alpha1.IndexChildComponent: render.ChildComponent(g.Name, component)}); err != nil {
		return fmt.Errorf("list %s history: %w", component, err)
	}
	var items []client.Object
	if err := meta.EachListItem(list, func(o runtime.Object) error {
		items = append(items, o.(client.Object))
		return nil
	}); err != nil {
		return err
	}
	sort.Slice(items, func(i, j int) bool {
		ti, tj := items[i].GetCreationTimestamp(), items[j].GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		return items[i].GetName() > items[j].GetName()
	})
	kept := 0
	for _, obj := range items {
		if slices.Contains(keep, obj.GetName()) {
			continue
		}
		if kept < historyKept {
			kept++
			continue
		}
		if err := p.cluster.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", component, obj.GetName(), err)
		}
	}
	return nil
}
