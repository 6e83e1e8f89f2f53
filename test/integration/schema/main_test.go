// Package schema checks pkg/admission/schema against a real kube-apiserver
// v1.37.2: for every object of the table, the offline decode, defaulting and
// validation must give the server's verdict, its status message and causes
// and, when the server accepts, the spec it stores.
package schema

import (
	"context"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	crdschema "github.com/c5c3/glance-operator/pkg/admission/schema"
	"github.com/c5c3/glance-operator/test/controlplane"
)

var (
	cl      client.Client
	offline *crdschema.Set
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{CRDs: controlplane.CRDs{Glance: true}, Webhooks: webhookOptions()}, setup))
}

func setup(srv *controlplane.APIServer) (func(), error) {
	var err error
	if offline, err = crdschema.Load(); err != nil {
		return nil, fmt.Errorf("load the offline schemas: %w", err)
	}
	ctx, stopWebhook := context.WithCancel(context.Background())
	if err := startWebhook(ctx, srv.Env.WebhookInstallOptions); err != nil {
		return stopWebhook, err
	}
	cl, err = client.New(srv.Config, client.Options{})
	return stopWebhook, err
}
