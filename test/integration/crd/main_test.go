// Package crd checks the generated Glance and GlanceBackend CRDs against a
// real kube-apiserver: schema defaults, every CEL rule with its exact message,
// the update transition rules, and what `kubectl` shows users.
package crd

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/controlplane"
)

const namespace = "crd-validation"

var (
	cfg *rest.Config
	cl  client.Client
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{CRDs: controlplane.CRDs{Glance: true}}, func(srv *controlplane.APIServer) (func(), error) {
		cfg = srv.Config
		var err error
		if cl, err = client.New(cfg, client.Options{}); err != nil {
			return nil, err
		}
		return nil, cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	}))
}
