package targetcluster_test

import (
	"crypto/x509/pkix"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// secretValue stands for every credential in the fixtures; no error may
// carry it.
const secretValue = "s3cr3t-value"

func kubeconfig(t *testing.T, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	ca, _ := clientCertificate(t)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["west"] = &clientcmdapi.Cluster{Server: "https://west.example:6443", CertificateAuthorityData: ca}
	cfg.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: secretValue}
	cfg.Contexts["west"] = &clientcmdapi.Context{Cluster: "west", AuthInfo: "operator"}
	cfg.CurrentContext = "west"
	if edit != nil {
		edit(cfg)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func clientCertificate(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	ca, err := controlplane.NewCA("target cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(pkix.Name{CommonName: "glance-operator"})
	if err != nil {
		t.Fatal(err)
	}
	return pair.Cert, pair.Key
}

func TestKubeconfigFromSecret(t *testing.T) {
	certPEM, keyPEM := clientCertificate(t)
	withData := func(data []byte) map[string][]byte { return map[string][]byte{targetcluster.KubeconfigSecretKey: data} }
	for _, tc := range []struct {
		name string
		data map[string][]byte
		// refused is a fragment of the refusal; empty means accepted.
		refused string
		check   func(*testing.T, *rest.Config)
	}{{
		name: "token",
		data: withData(kubeconfig(t, nil)),
		check: func(t *testing.T, rc *rest.Config) {
			if rc.Host != "https://west.example:6443" || rc.BearerToken != secretValue {
				t.Errorf("host %q, token set %v", rc.Host, rc.BearerToken == secretValue)
			}
		},
	}, {
		name: "client certificate",
		data: withData(kubeconfig(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["operator"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
		})),
		check: func(t *testing.T, rc *rest.Config) {
			if string(rc.CertData) != string(certPEM) || rc.BearerToken != "" {
				t.Errorf("want the client certificate and no token")
			}
			if _, err := rest.HTTPClientFor(rc); err != nil {
				t.Errorf("no HTTP client from the config: %v", err)
			}
		},
	}, {
		name: "exec plugin",
		data: withData(kubeconfig(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
				Command: "aws", Args: []string{"--secret", secretValue}, APIVersion: "client.authentication.k8s.io/v1",
			}}
		})),
		refused: `user "operator" uses an exec credential plugin: exec plugins are refused`,
	}, {
		name: "exec plugin on a user the current context does not use",
		data: withData(kubeconfig(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["other"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "gke-gcloud-auth-plugin"}}
		})),
		refused: `user "other" uses an exec credential plugin`,
	}, {
		name: "auth-provider",
		data: withData(kubeconfig(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["operator"] = &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{
				Name: "oidc", Config: map[string]string{"id-token": secretValue},
			}}
		})),
		refused: `user "operator" uses the auth-provider "oidc": auth-provider plugins are refused`,
	}, {
		name: "tokenFile",
		data: withData(kubeconfig(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["operator"] = &clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}
		})),
		refused: `user "operator" reads tokenFile from a file`,
	}, {
		name:    "certificate-authority file",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { c.Clusters["west"].CertificateAuthority = "/etc/ca.crt" })),
		refused: `cluster "west" reads certificate-authority from a file`,
	}, {
		name:    "certificate-authority-data not PEM",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { c.Clusters["west"].CertificateAuthorityData = []byte(secretValue) })),
		refused: "the kubeconfig's certificates do not load: unable to load root certificates",
	}, {
		name:    "missing key",
		data:    map[string][]byte{"config": kubeconfig(t, nil)},
		refused: `the Secret has no "kubeconfig" key`,
	}, {
		name:    "empty key",
		data:    withData(nil),
		refused: `the Secret's "kubeconfig" key is empty`,
	}, {
		name:    "garbage",
		data:    withData([]byte("token: [" + secretValue)),
		refused: "the kubeconfig does not parse as a kubeconfig (YAML or JSON) at line 1",
	}, {
		name:    "garbage of the wrong type",
		data:    withData([]byte("users: " + secretValue)),
		refused: "the kubeconfig does not parse as a kubeconfig (YAML or JSON) at field Config.users",
	}, {
		name:    "no current-context",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { c.CurrentContext = "" })),
		refused: "the kubeconfig sets no current-context",
	}, {
		name:    "current-context not defined",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { c.CurrentContext = "east" })),
		refused: `the kubeconfig's current-context "east" is not defined in it`,
	}, {
		name:    "context without a cluster",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { c.Contexts["west"].Cluster = "" })),
		refused: `context "west" names no cluster`,
	}, {
		name:    "no such cluster",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { delete(c.Clusters, "west") })),
		refused: `context "west" names cluster "west", which the kubeconfig does not define`,
	}, {
		name:    "cluster without a server",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { c.Clusters["west"].Server = "" })),
		refused: `cluster "west" has no server`,
	}, {
		name:    "no such user",
		data:    withData(kubeconfig(t, func(c *clientcmdapi.Config) { delete(c.AuthInfos, "operator") })),
		refused: `context "west" names user "operator", which the kubeconfig does not define`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := targetcluster.KubeconfigFromSecret(&corev1.Secret{Data: tc.data})
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if rc.ExecProvider != nil || rc.AuthProvider != nil {
					t.Error("the config runs a plugin")
				}
				tc.check(t, rc)
				return
			}
			if err == nil {
				t.Fatalf("accepted, want refused with %q", tc.refused)
			}
			if !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("refusal %q, want it to say %q", err, tc.refused)
			}
			if strings.Contains(err.Error(), secretValue) {
				t.Errorf("refusal carries the Secret's contents: %q", err)
			}
		})
	}
}
