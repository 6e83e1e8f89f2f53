package chart

import (
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
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
	cfg, err := Configuration(kubeconfig, namespace)
	if err != nil {
		return nil, err
	}
	c, err := Load()
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = ReleaseName
	install.Namespace = namespace
	install.CreateNamespace = true
	install.Timeout = 2 * time.Minute
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, fmt.Errorf("helm install: %w", err)
	}
	return rel, nil
}
