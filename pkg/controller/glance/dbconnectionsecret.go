package glance

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// ConnectionKey is the key of the DSN in the {name}-db-connection Secret.
const ConnectionKey = "connection"

// reconcileDBConnectionSecret materializes the pymysql DSN into the derived
// {name}-db-connection Secret, and digests it, keyed, for the rollout
// annotation. Where the operator makes the database users, the DSN is that
// of the user slot ensureDatabaseUsers picks, which the Secret names too.
// Whether to write is decided by digests (ensureSecret); the DSN itself is
// made only for a write, from the credentials (read again when this pass
// kept what was derived from them) or the active slot's Secret.
func reconcileDBConnectionSecret(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	name := render.DBConnectionSecretName(g.Name)
	if err := ensureDatabaseUsers(ctx, g, p); err != nil {
		if result, conflict := databaseConflict(ctx, g, p, err); conflict {
			return result, nil
		}
		return ctrl.Result{}, err
	}
	if p.credentials.dsnError != "" {
		return terminalFailure(g, v1alpha1.ConditionSecretsReady, v1alpha1.ReasonConfigError, "cannot build the database connection: "+p.credentials.dsnError)
	}
	if p.dbSlot == "" {
		p.dsnHash = p.credentials.dsnHash
	}
	digests := map[string]string{ConnectionKey: p.dsnHash}
	if p.dbSlot != "" {
		digests[SlotKey] = keyedDigest(p.digestKey, string(p.dbSlot))
	}
	if err := ensureSecret(ctx, p, g, name, componentDatabase, secretData{digests: digests, values: func(ctx context.Context) (map[string][]byte, error) {
		dsn, err := connectionDSN(ctx, g, p)
		if err != nil {
			return nil, err
		}
		data := map[string][]byte{ConnectionKey: []byte(dsn)}
		if p.dbSlot != "" {
			data[SlotKey] = []byte(p.dbSlot)
		}
		return data, nil
	}}); err != nil {
		if result, conflict := databaseConflict(ctx, g, p, err); conflict {
			return result, nil
		}
		return ctrl.Result{}, err
	}
	p.dbConnectionHash = p.dsnHash
	return ctrl.Result{}, nil
}
