package targetcluster

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A target cluster is registered by a Secret in the clusters namespace
// carrying this label and a kubeconfig under KubeconfigSecretKey; the
// Secret's name is the cluster's name. The label is multicluster-runtime's,
// so the same Secrets serve its kubeconfig provider.
const (
	KubeconfigSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"
	KubeconfigSecretKey   = "kubeconfig"
)

// KubeconfigFromSecret returns the REST config of a kubeconfig Secret, or
// why it is refused. No error carries the Secret's contents: kubeconfigs
// hold credentials, and the reasons end up in conditions and logs.
func KubeconfigFromSecret(s *corev1.Secret) (*rest.Config, error) {
	data, ok := s.Data[KubeconfigSecretKey]
	if !ok {
		return nil, fmt.Errorf("the Secret has no %q key", KubeconfigSecretKey)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("the Secret's %q key is empty", KubeconfigSecretKey)
	}
	return ParseKubeconfig(data)
}

// ParseKubeconfig returns the REST config of a kubeconfig's current
// context. It refuses what the operator will not do: run credential plugins
// (exec, auth-provider), or read files from its own filesystem (a
// tokenFile there would be the operator's own token, sent to whatever
// server the kubeconfig names).
func ParseKubeconfig(data []byte) (*rest.Config, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, parseError(err)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		if err := checkUser(name, cfg.AuthInfos[name]); err != nil {
			return nil, err
		}
	}
	if cfg.CurrentContext == "" {
		return nil, errors.New("the kubeconfig sets no current-context")
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || kctx == nil {
		return nil, fmt.Errorf("the kubeconfig's current-context %q is not defined in it", cfg.CurrentContext)
	}
	if kctx.Cluster == "" {
		return nil, fmt.Errorf("context %q names no cluster", cfg.CurrentContext)
	}
	cl, ok := cfg.Clusters[kctx.Cluster]
	if !ok || cl == nil {
		return nil, fmt.Errorf("context %q names cluster %q, which the kubeconfig does not define", cfg.CurrentContext, kctx.Cluster)
	}
	if cl.Server == "" {
		return nil, fmt.Errorf("cluster %q has no server", kctx.Cluster)
	}
	if cl.CertificateAuthority != "" {
		return nil, fmt.Errorf("cluster %q reads certificate-authority from a file: a registered kubeconfig must carry certificate-authority-data inline", kctx.Cluster)
	}
	if kctx.AuthInfo != "" {
		if _, ok := cfg.AuthInfos[kctx.AuthInfo]; !ok {
			return nil, fmt.Errorf("context %q names user %q, which the kubeconfig does not define", cfg.CurrentContext, kctx.AuthInfo)
		}
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, cfg.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		// clientcmd's validation names fields and entries, never values.
		return nil, fmt.Errorf("the kubeconfig is not usable: %w", err)
	}
	if rc.ExecProvider != nil || rc.AuthProvider != nil {
		return nil, errors.New("the kubeconfig's user runs a credential plugin: plugins are refused")
	}
	if _, err := rest.TLSConfigFor(rc); err != nil {
		// client-go names what it could not load, not its contents.
		return nil, fmt.Errorf("the kubeconfig's certificates do not load: %w", err)
	}
	return rc, nil
}

func checkUser(name string, u *clientcmdapi.AuthInfo) error {
	switch {
	case u == nil:
		return nil
	case u.Exec != nil:
		return fmt.Errorf("user %q uses an exec credential plugin: exec plugins are refused, the operator never runs plugins; use a token or a client certificate", name)
	case u.AuthProvider != nil:
		return fmt.Errorf("user %q uses the auth-provider %q: auth-provider plugins are refused, the operator never runs plugins; use a token or a client certificate", name, u.AuthProvider.Name)
	case u.TokenFile != "":
		return fmt.Errorf("user %q reads tokenFile from a file: a registered kubeconfig must carry its token inline", name)
	case u.ClientCertificate != "" || u.ClientKey != "":
		return fmt.Errorf("user %q reads client-certificate or client-key from a file: a registered kubeconfig must carry client-certificate-data and client-key-data inline", name)
	}
	return nil
}

// Parser messages can quote the input; only the position and the field
// they name are kept.
var (
	parseLine  = regexp.MustCompile(`line (\d+)`)
	parseField = regexp.MustCompile(`Go struct field ([A-Za-z0-9_.]+)`)
)

func parseError(err error) error {
	where := ""
	if m := parseLine.FindStringSubmatch(err.Error()); m != nil {
		where = " at line " + m[1]
	} else if m := parseField.FindStringSubmatch(err.Error()); m != nil {
		where = " at field " + m[1]
	}
	return fmt.Errorf("the kubeconfig does not parse as a kubeconfig (YAML or JSON)%s", where)
}
