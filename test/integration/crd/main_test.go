// Package crd checks the generated Glance and GlanceBackend CRDs against a
// real kube-apiserver: schema defaults, every CEL rule with its exact message,
// the update transition rules, and what `kubectl` shows users.
package crd

import (
	"context"
	"fmt"
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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	srv, err := controlplane.StartAPIServer(controlplane.APIServerOptions{CRDs: controlplane.CRDs{Glance: true}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start kube-apiserver:", err)
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop kube-apiserver:", err)
		}
	}()
	cfg = srv.Config
	if cl, err = client.New(cfg, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: client:", err)
		return 1
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := cl.Create(context.Background(), ns); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: create namespace:", err)
		return 1
	}
	return m.Run()
}
