package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	cmutil "github.com/cert-manager/cert-manager/pkg/util"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// runCAInjector runs the cainjector's reconcilers for every injectable kind
// (Mutating/ValidatingWebhookConfiguration, APIService,
// CustomResourceDefinition), with Certificates and Secrets as CA sources,
// until ctx ends. ready is set once the manager's caches have synced.
func runCAInjector(ctx context.Context, o options, ready *atomic.Bool) error {
	log := klog.Background().WithName("cert-manager").WithName("cainjector")
	ctx = klog.NewContext(ctx, log)

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("cainjector: kubeconfig: %w", err)
	}
	cfg = cmutil.RestConfigWithUserAgent(cfg, "cainjector")

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))

	var namespaces map[string]cache.Config
	if o.namespace != "" {
		namespaces = map[string]cache.Config{o.namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: log,
		Cache: cache.Options{
			ReaderFailOnMissingInformer: true,
			DefaultNamespaces:           namespaces,
		},
		// As cert-manager's cainjector: Secrets are read live, and
		// watched by metadata only.
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:          false,
		Metrics:                 metricsserver.Options{BindAddress: o.cainjectorMetricsAddr},
		HealthProbeBindAddress:  "0",
		GracefulShutdownTimeout: ptrTo(10 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("cainjector: manager: %w", err)
	}

	// The Certificate data source needs the Certificate CRD; wait for it
	// as cert-manager's cainjector does.
	direct, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("cainjector: %w", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, &apiext.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			log.Info("waiting for the certificates.cert-manager.io CRD")
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return fmt.Errorf("cainjector: certificates.cert-manager.io CRD: %w", err)
	}

	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    o.namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		return fmt.Errorf("cainjector: register injectors: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// The reconcilers' informers, blocking until each has synced.
		for _, obj := range []client.Object{
			&admissionregv1.MutatingWebhookConfiguration{}, &admissionregv1.ValidatingWebhookConfiguration{},
			&apireg.APIService{}, &apiext.CustomResourceDefinition{}, &cmapi.Certificate{},
		} {
			if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("cainjector: informer for %T: %w", obj, err)
			}
		}
		if mgr.GetCache().WaitForCacheSync(ctx) {
			log.Info("cainjector caches synced")
			ready.Store(true)
		}
		return nil
	})); err != nil {
		return fmt.Errorf("cainjector: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("cainjector: %w", err)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
