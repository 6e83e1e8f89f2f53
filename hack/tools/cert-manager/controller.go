package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	// The issuer types the issuers and clusterissuers controllers set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers this binary runs: they register themselves with
// controller.Known() when their packages are imported.
var controllerNames = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
}

// runController runs the cert-manager controllers until ctx ends. ready is
// set once the informer caches have synced.
func runController(ctx context.Context, o options, ready *atomic.Bool) error {
	ctx = klog.NewContext(ctx, klog.Background().WithName("cert-manager").WithName("controller"))
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		Namespace:          o.namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: o.clusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			// cert-manager's defaults.
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}

	names := controllerNames
	if o.namespace != "" {
		// A namespaced cert-manager runs no cluster-scoped controller.
		names = nil
		for _, n := range controllerNames {
			if n != clusterissuers.ControllerName {
				names = append(names, n)
			}
		}
	}

	g, ctx := errgroup.WithContext(ctx)
	ln, err := listen(ctx, o.metricsAddr)
	if err != nil {
		return fmt.Errorf("controller metrics: %w", err)
	}
	if ln != nil {
		// The collectors register informers: before the factories start.
		base.Metrics.SetupCertificateCollector(base.SharedInformerFactory.Certmanager().V1().Certificates().Lister())
		base.Metrics.SetupIssuerCollector(base.SharedInformerFactory.Certmanager().V1().Issuers().Lister())
		if o.namespace == "" {
			base.Metrics.SetupClusterIssuerCollector(base.SharedInformerFactory.Certmanager().V1().ClusterIssuers().Lister())
		}
		klog.InfoS("serving controller metrics", "address", ln.Addr().String())
		srv := base.Metrics.NewServer(ln)
		srv.ReadHeaderTimeout = 10 * time.Second
		serveHTTP(ctx, g, srv, ln)
	}

	known := controller.Known()
	for _, n := range names {
		construct, ok := known[n]
		if !ok {
			return fmt.Errorf("controller %s is not registered", n)
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", n, err)
		}
		g.Go(func() error {
			klog.InfoS("starting controller", "controller", n)
			return c.Run(o.workers, ctx)
		})
	}

	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	g.Go(func() error {
		synced := func(m map[string]bool) bool {
			for _, ok := range m {
				if !ok {
					return false
				}
			}
			return true
		}
		if synced(base.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done())) &&
			synced(mapTypes(base.SharedInformerFactory.WaitForCacheSync(ctx.Done()))) {
			klog.InfoS("controller caches synced", "controllers", names)
			ready.Store(true)
		}
		return nil
	})

	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}

func mapTypes[K comparable](m map[K]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[fmt.Sprint(k)] = v
	}
	return out
}
