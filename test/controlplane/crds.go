package controlplane

import (
	"path/filepath"
)

// Versions of the projects whose CRDs are installed from their Go modules.
const (
	GatewayAPIVersion  = "v1.6.3"
	CertManagerVersion = "v1.21.2"
)

// CRDs selects the CustomResourceDefinitions to install.
type CRDs struct {
	// Glance installs the operator's own CRDs from charts/glance-operator/files/crds.
	Glance bool
	// MariaDB installs the mariadb-operator kinds (checked-in minimal CRDs).
	MariaDB bool
	// ExternalSecrets installs the External Secrets Operator kinds
	// (checked-in minimal CRDs).
	ExternalSecrets bool
	// GatewayAPI installs GatewayClass, Gateway, HTTPRoute and
	// ReferenceGrant from the gateway-api module.
	GatewayAPI bool
	// CertManager installs cert-manager's CRDs from the cert-manager module.
	CertManager bool
	// PrometheusOperator installs ServiceMonitor and PrometheusRule,
	// generated from the typed prometheus-operator API (`make manifests`).
	PrometheusOperator bool
}

// AllCRDs is the operator's CRDs plus every external one it talks to.
var AllCRDs = CRDs{Glance: true, MariaDB: true, ExternalSecrets: true, GatewayAPI: true, CertManager: true}

// Paths returns the files and directories holding the selected CRDs.
func (c CRDs) Paths() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	var paths []string
	if c.Glance {
		paths = append(paths, filepath.Join(root, "charts", "glance-operator", "files", "crds"))
	}
	if c.MariaDB {
		paths = append(paths, filepath.Join(root, "test", "crds", "mariadb-operator.yaml"))
	}
	if c.ExternalSecrets {
		paths = append(paths, filepath.Join(root, "test", "crds", "external-secrets.yaml"))
	}
	if c.GatewayAPI {
		dir, err := moduleDir("sigs.k8s.io/gateway-api", GatewayAPIVersion)
		if err != nil {
			return nil, err
		}
		for _, kind := range []string{"gatewayclasses", "gateways", "httproutes", "referencegrants"} {
			paths = append(paths, filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_"+kind+".yaml"))
		}
	}
	if c.CertManager {
		dir, err := moduleDir("github.com/cert-manager/cert-manager", CertManagerVersion)
		if err != nil {
			return nil, err
		}
		paths = append(paths, filepath.Join(dir, "deploy", "crds"))
	}
	if c.PrometheusOperator {
		paths = append(paths, filepath.Join(root, "test", "crds", "prometheus-operator"))
	}
	return paths, nil
}
