package glance

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// DatabasePollInterval is how often the MariaDB, db-sync and
// ready-default-backend waits are polled.
const DatabasePollInterval = 30 * time.Second

// deleteDatabaseObjects deletes the Database, and the Users and Grants of
// both user slots, of a managed Glance and returns the ones that still
// exist. A brownfield Glance has none. An object of such a name that is not
// the Glance's is another tenant's: it is neither deleted nor waited for.
func deleteDatabaseObjects(ctx context.Context, c *targetcluster.Cluster, g *v1alpha1.Glance) ([]string, error) {
	if g.Spec.Database.ClusterRef == nil {
		return nil, nil
	}
	users := []string{render.DatabaseUserObjectName(g.Name, database.SlotA), render.DatabaseUserObjectName(g.Name, database.SlotB)}
	var remaining []string
	for _, o := range []struct {
		gvk   schema.GroupVersionKind
		names []string
	}{{render.GrantGVK, users}, {render.UserGVK, users}, {render.DatabaseGVK, []string{g.Name}}} {
		installed, err := c.Serves(o.gvk)
		if err != nil {
			return nil, err
		}
		if !installed {
			continue
		}
		for _, name := range o.names {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.gvk)
			err = c.Reader.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: name}, u)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("get %s %s/%s: %w", o.gvk.Kind, g.Namespace, name, err)
			}
			if !ownedBy(u, g) {
				continue
			}
			remaining = append(remaining, o.gvk.Kind+" "+name)
			if u.GetDeletionTimestamp() != nil {
				continue
			}
			if err := c.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("delete %s %s/%s: %w", o.gvk.Kind, g.Namespace, name, err)
			}
		}
	}
	return remaining, nil
}

// ensureManagedDatabase gates on the MariaDB cluster, then ensures the
// Database, User and Grant of a managed Glance and waits for them. done is
// false while the pass must wait; the condition then says why.
func ensureManagedDatabase(ctx context.Context, g *v1alpha1.Glance, p *pass) (done bool, err error) {
	ref := g.Spec.Database.ClusterRef
	wait := func(reason, msg string) (bool, error) {
		pipeline.SetCondition(g, v1alpha1.ConditionDatabaseReady, metav1.ConditionFalse, reason, msg)
		return false, nil
	}
	mdb, installed, found, err := getOptional(ctx, p.cluster, p.cluster.Client, render.MariaDBGVK, client.ObjectKey{Namespace: g.Namespace, Name: ref.Name})
	switch {
	case err != nil:
		return false, err
	case !installed:
		return wait(v1alpha1.ReasonClusterNotReady, fmt.Sprintf("the mariadb-operator API (%s %s) is not installed", render.MariaDBGVK.GroupVersion(), render.MariaDBGVK.Kind))
	case !found:
		return wait(v1alpha1.ReasonClusterNotReady, fmt.Sprintf("MariaDB %q not found", ref.Name))
	}
	if status, msg, _ := readyCondition(mdb); status != string(metav1.ConditionTrue) {
		if msg == "" {
			msg = "no Ready condition yet"
		}
		return wait(v1alpha1.ReasonClusterNotReady, fmt.Sprintf("MariaDB %q is not Ready: %s", ref.Name, msg))
	}

	slot := cmp.Or(p.dbSlot, database.SlotA)
	objs := render.DatabaseObjects(g, slot, cmp.Or(p.dbUser, slot.Username(p.credentials.username)))
	ready := make([]bool, len(objs))
	applies := make([]func() error, len(objs))
	for i, obj := range objs {
		applies[i] = func() (err error) {
			ready[i], err = applyDatabaseObject(ctx, p, g, obj)
			return err
		}
	}
	if err := pipeline.Concurrently(applies...); err != nil {
		return false, err
	}
	var notReady []string
	for i, obj := range objs {
		if !ready[i] {
			notReady = append(notReady, obj.GetKind()+" "+obj.GetName())
		}
	}
	if len(notReady) > 0 {
		return wait(v1alpha1.ReasonWaitingForDatabase, fmt.Sprintf("waiting for %s to be Ready", strings.Join(notReady, ", ")))
	}
	return true, nil
}

// applyDatabaseObject brings the object to what the operator renders, as
// every child is applied (fields the mariadb-operator defaults are left
// alone), and reports whether it is Ready.
func applyDatabaseObject(ctx context.Context, p *pass, g *v1alpha1.Glance, desired *unstructured.Unstructured) (bool, error) {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(desired.GroupVersionKind())
	desiredSpec, _ := desired.Object["spec"].(map[string]any)
	if err := applyChild(ctx, p, g, desired, existing, func() bool {
		return equality.Semantic.DeepDerivative(desiredSpec, existing.Object["spec"])
	}, func() error {
		spec, _ := existing.Object["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
		}
		maps.Copy(spec, desiredSpec)
		existing.Object["spec"] = spec
		return nil
	}); err != nil {
		return false, err
	}
	status, _, _ := readyCondition(existing)
	return status == string(metav1.ConditionTrue), nil
}
