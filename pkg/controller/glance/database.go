package glance

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// DatabasePollInterval is how often the MariaDB, db-sync and
// ready-default-backend waits are polled.
const DatabasePollInterval = 30 * time.Second

// The mariadb-operator kinds a managed database is made of.
var (
	mariaDBGVK  = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "MariaDB"}
	databaseGVK = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "Database"}
	userGVK     = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "User"}
	grantGVK    = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "Grant"}
)

// deleteDatabaseObjects deletes the Database, User and Grant of a managed
// Glance and returns the ones that still exist. A brownfield Glance has none.
func deleteDatabaseObjects(ctx context.Context, c *targetcluster.Cluster, g *v1alpha1.Glance) ([]string, error) {
	if g.Spec.Database.ClusterRef == nil {
		return nil, nil
	}
	var remaining []string
	for _, gvk := range []schema.GroupVersionKind{grantGVK, userGVK, databaseGVK} {
		installed, err := c.Serves(gvk)
		if err != nil {
			return nil, err
		}
		if !installed {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err = c.Reader.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, u)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s %s/%s: %w", gvk.Kind, g.Namespace, g.Name, err)
		}
		remaining = append(remaining, gvk.Kind+" "+g.Name)
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		if err := c.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete %s %s/%s: %w", gvk.Kind, g.Namespace, g.Name, err)
		}
	}
	return remaining, nil
}
