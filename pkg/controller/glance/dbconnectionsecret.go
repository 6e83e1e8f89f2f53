package glance

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// ConnectionKey is the key of the DSN in the {name}-db-connection Secret.
const ConnectionKey = "connection"

// reconcileDBConnectionSecret materializes the pymysql DSN into the derived
// {name}-db-connection Secret and digests it, keyed, for the rollout
// annotation.
func reconcileDBConnectionSecret(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	dsn, err := render.DSN(g, p.dbUsername, p.dbPassword)
	if err != nil {
		return terminalFailure(g, v1alpha1.ConditionSecretsReady, v1alpha1.ReasonConfigError, fmt.Sprintf("cannot build the database connection: %v", err))
	}
	name := render.DBConnectionSecretName(g.Name)
	if err := ensureSecret(ctx, p, g, name, componentDatabase, map[string][]byte{ConnectionKey: []byte(dsn)}); err != nil {
		return ctrl.Result{}, err
	}
	p.dbConnectionHash = keyedDigest(p.digestKey, dsn)
	return ctrl.Result{}, nil
}
