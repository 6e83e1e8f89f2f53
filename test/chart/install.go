package chart

import (
	"fmt"
	"io"
	"os"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
)

// Configuration is the Helm SDK's client for the cluster of a kubeconfig,
// in namespace, keeping releases in Secrets as helm does.
func Configuration(kubeconfig, namespace string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr.To(kubeconfig)
	flags.Namespace = ptr.To(namespace)
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// InstallRelease runs `helm install` of the chart with values as release
// ReleaseName in namespace, creating the namespace, as the kubeconfig's
// user.
func InstallRelease(kubeconfig, namespace string, values map[string]any) (*release.Release, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	return install(kubeconfig, namespace, values, func(*action.Install) (*helmchart.Chart, error) { return c, nil })
}

// InstallFromRegistry runs `helm install oci://… --version version` of a
// published chart as InstallRelease does: Helm's registry client pulls it.
func InstallFromRegistry(kubeconfig, namespace, ref, version string, plainHTTP bool, values map[string]any) (*release.Release, error) {
	return install(kubeconfig, namespace, values, func(i *action.Install) (*helmchart.Chart, error) {
		i.Version = version
		i.PlainHTTP = plainHTTP
		return pull(&i.ChartPathOptions, i.SetRegistryClient, ref, plainHTTP)
	})
}

// UpgradeFromRegistry runs `helm upgrade --reset-then-reuse-values
// ReleaseName oci://… --version version` in namespace, as a user moves an
// installed chart to a newer release: the new chart's defaults (its pinned
// image digests among them) with the values given at install on top, which
// --reuse-values would not do (it keeps the old chart's defaults, and so the
// old images).
func UpgradeFromRegistry(kubeconfig, namespace, ref, version string, plainHTTP bool) (*release.Release, error) {
	cfg, err := Configuration(kubeconfig, namespace)
	if err != nil {
		return nil, err
	}
	u := action.NewUpgrade(cfg)
	u.Namespace = namespace
	u.Version = version
	u.PlainHTTP = plainHTTP
	u.ResetThenReuseValues = true
	u.Timeout = 2 * time.Minute
	c, err := pull(&u.ChartPathOptions, u.SetRegistryClient, ref, plainHTTP)
	if err != nil {
		return nil, err
	}
	rel, err := u.Run(ReleaseName, c, map[string]any{})
	if err != nil {
		return nil, fmt.Errorf("helm upgrade: %w", err)
	}
	return rel, nil
}

// pull locates a published chart with Helm's registry client, as helm
// install and helm upgrade do with an oci:// reference, and loads it.
func pull(o *action.ChartPathOptions, setClient func(*registry.Client), ref string, plainHTTP bool) (*helmchart.Chart, error) {
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard)}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	setClient(rc)
	cache, err := os.MkdirTemp("", "helm-cache-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(cache)
	settings := cli.New()
	settings.RepositoryCache = cache
	path, err := o.LocateChart(ref, settings)
	if err != nil {
		return nil, fmt.Errorf("helm pull %s --version %s: %w", ref, o.Version, err)
	}
	return loader.Load(path)
}

func install(kubeconfig, namespace string, values map[string]any, locate func(*action.Install) (*helmchart.Chart, error)) (*release.Release, error) {
	cfg, err := Configuration(kubeconfig, namespace)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = ReleaseName
	install.Namespace = namespace
	install.CreateNamespace = true
	install.Timeout = 2 * time.Minute
	c, err := locate(install)
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, fmt.Errorf("helm install: %w", err)
	}
	return rel, nil
}
