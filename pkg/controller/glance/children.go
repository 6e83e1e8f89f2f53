package glance

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
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
// component's history, of list's kind, keeping it and those in use.
func ensureImmutable(ctx context.Context, p *pass, g *v1alpha1.Glance, obj client.Object, list client.ObjectList, component string, inUse []string) error {
	if _, err := getOrCreate(ctx, p, g, obj, obj.DeepCopyObject().(client.Object)); err != nil {
		return err
	}
	return pruneHistory(ctx, p, g, list, component, append([]string{obj.GetName()}, inUse...))
}

// ensureSecret makes the named Secret hold exactly data, writing only when
// something differs.
func ensureSecret(ctx context.Context, p *pass, g *v1alpha1.Glance, name, component string, data map[string][]byte) error {
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Namespace, Labels: childLabels(g, component)},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	existing := &corev1.Secret{}
	return applyChild(ctx, p, g, desired, existing, func() bool {
		return existing.Type == desired.Type && equality.Semantic.DeepEqual(existing.Data, desired.Data)
	}, func() { existing.Type, existing.Data = desired.Type, desired.Data })
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
