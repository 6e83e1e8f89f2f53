package glance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// ConnectionKey is the key of the DSN in the {name}-db-connection Secret.
const ConnectionKey = "connection"

// reconcileDBConnectionSecret materializes the pymysql DSN into the derived
// {name}-db-connection Secret, and digests it, keyed, for the rollout
// annotation. Where the operator makes the database users, the DSN is that
// of the user slot ensureDatabaseUsers picks, which the Secret names too. A pass that did not read the credentials takes the DSN from
// the live Secret when its digest is the derived one, and reads them again
// when it is not (the Secret was changed or deleted).
func reconcileDBConnectionSecret(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	name := render.DBConnectionSecretName(g.Name)
	if err := ensureDatabaseUsers(ctx, g, p); err != nil {
		if result, conflict := databaseConflict(ctx, g, p, err); conflict {
			return result, nil
		}
		return ctrl.Result{}, err
	}
	if p.dsn == "" && p.credentials.dsnError == "" {
		var live corev1.Secret
		err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: name}, &live)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return ctrl.Result{}, fmt.Errorf("get Secret %s: %w", name, err)
		case err == nil && keyedDigest(p.digestKey, string(live.Data[ConnectionKey])) == p.credentials.dsnHash:
			p.dsn = string(live.Data[ConnectionKey])
		default:
			p.cluster.Forget(credentialsDerivation(g))
			if err := deriveCredentials(ctx, g, p); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if p.credentials.dsnError != "" {
		return terminalFailure(g, v1alpha1.ConditionSecretsReady, v1alpha1.ReasonConfigError, "cannot build the database connection: "+p.credentials.dsnError)
	}
	if p.dsn == "" {
		// Read again, the credentials no longer make a DSN: they changed
		// since the Secrets step, and their watch event brings the next
		// pass.
		return ctrl.Result{}, fmt.Errorf("the database credentials changed during the pass")
	}
	data := map[string][]byte{ConnectionKey: []byte(p.dsn)}
	if p.dbSlot != "" {
		data[SlotKey] = []byte(p.dbSlot)
	}
	if err := ensureSecret(ctx, p, g, name, componentDatabase, data); err != nil {
		if result, conflict := databaseConflict(ctx, g, p, err); conflict {
			return result, nil
		}
		return ctrl.Result{}, err
	}
	p.dbConnectionHash = p.credentials.dsnHash
	return ctrl.Result{}, nil
}
