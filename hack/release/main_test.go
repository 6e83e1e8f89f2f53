package main

import (
	"crypto/elliptic"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/c5c3/glance-operator/hack/release/publish"
)

// TestOptionsNameTheSigningKey: a signing key that cannot be used is
// refused before anything is built, by the flag's name, saying why; a
// cosign key with its password in COSIGN_PASSWORD signs.
func TestOptionsNameTheSigningKey(t *testing.T) {
	priv, _, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("pw")))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "cosign.key")
	if err := os.WriteFile(key, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(publish.SigningKeyPasswordEnv, "")
	os.Unsetenv(publish.SigningKeyPasswordEnv)
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{filepath.Join(t.TempDir(), "absent.key"), []string{"-signing-key", "absent.key"}},
		{key, []string{"-signing-key", key, "encrypted", publish.SigningKeyPasswordEnv}},
	} {
		_, err := options([]string{"-registry=127.0.0.1:1/c5c3", "-signing-key=" + tc.key})
		if err == nil {
			t.Errorf("-signing-key=%s: accepted", tc.key)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("-signing-key=%s: the error %q does not say %q", tc.key, err, w)
			}
		}
	}

	t.Setenv(publish.SigningKeyPasswordEnv, "pw")
	o, err := options([]string{"-registry=127.0.0.1:1/c5c3", "-signing-key=" + key, "-arch=arm64"})
	if err != nil || o.Signer == nil || strings.Join(o.Arches, ",") != "arm64" {
		t.Errorf("options: %+v, %v; want a signer for %s", o, err, key)
	}
	if o, err := options([]string{"-registry=127.0.0.1:1/c5c3"}); err != nil || o.Signer != nil {
		t.Errorf("without -signing-key: %+v, %v; want an unsigned release", o, err)
	}
}
