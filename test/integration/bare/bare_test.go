// Package bare runs the manager on an API server that has only the Glance
// CRDs: no External Secrets, no mariadb-operator, no Gateway API. The
// operator must start, run, and say what is missing through conditions.
package bare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

var srv *controlplane.APIServer

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.APIServerOptions{CRDs: controlplane.CRDs{Glance: true}},
		func(s *controlplane.APIServer) (func(), error) { srv = s; return nil, nil }))
}

func TestManagerWithoutOptionalAPIs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := operator.New(ctx, srv.Config, operator.Options{MetricsAddress: "0", HealthAddress: "0", Metrics: m, GracefulShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("the manager does not set up without the optional APIs: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	scheme, _ := operator.NewScheme()
	cl, err := client.New(srv.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}); err != nil {
		t.Fatal(err)
	}
	g := &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Name: "glance", Namespace: "bare"},
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: "2025.2",
			Image:            v1alpha1.ImageSpec{Repository: "registry.example.com/openstack/glance", Tag: "2025.2"},
			Database:         v1alpha1.DatabaseSpec{ClusterRef: &v1alpha1.LocalObjectReference{Name: "mariadb"}, Database: "glance", SecretRef: v1alpha1.SecretKeySelector{Name: "db"}},
			KeystoneEndpoint: "http://keystone:5000/v3",
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: "su"}},
		},
	}
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	want := "the External Secrets Operator API (external-secrets.io/v1 ClusterSecretStore) is not installed"
	running := func() error {
		select {
		case err := <-done:
			return fmt.Errorf("the manager stopped: %v", err)
		default:
			return nil
		}
	}
	operatortest.Eventually(t, fmt.Sprintf("SecretsReady SecretStoreNotReady %q", want), func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			return err
		}
		got := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionSecretsReady)
		if got != nil && got.Reason == v1alpha1.ReasonSecretStoreNotReady && got.Message == want {
			return nil
		}
		return fmt.Errorf("SecretsReady %+v", got)
	}, operatortest.Unless(running))

	// The cache holds only the operator's own Secrets: an unrelated one,
	// however large, never enters it.
	big := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "bare"}, Data: map[string][]byte{"blob": make([]byte, 512<<10)}}
	if err := cl.Create(ctx, big); err != nil {
		t.Fatal(err)
	}
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "bare", Labels: map[string]string{render.LabelManagedBy: render.ManagedBy}}}
	if err := cl.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// Secrets are cached as metadata only: their data, the operator's own
	// credentials included, is never in the cache.
	cached := &metav1.PartialObjectMetadataList{}
	cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	operatortest.Eventually(t, "one Secret in the cache", func() error {
		if err := mgr.GetCache().List(ctx, cached, client.InNamespace("bare")); err != nil {
			t.Fatalf("list the cached Secrets: %v", err)
		}
		if len(cached.Items) != 1 {
			return fmt.Errorf("cached Secrets %v", secretNames(cached))
		}
		return nil
	}, operatortest.Within(10*time.Second))
	if cached.Items[0].Name != "mine" {
		t.Fatalf("cached Secrets %v, want only the operator's", secretNames(cached))
	}
	if err := mgr.GetCache().List(ctx, &corev1.SecretList{}, client.InNamespace("bare")); !errors.Is(err, targetcluster.ErrSecretData) {
		t.Fatalf("listing whole Secrets from the cache: %v, want ErrSecretData", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the manager stopped with %v", err)
	}
}

func secretNames(l *metav1.PartialObjectMetadataList) []string {
	var n []string
	for _, s := range l.Items {
		n = append(n, s.Name)
	}
	return n
}
