package publishtest

import (
	"crypto"
	"fmt"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Verifier is what `cosign verify --key cosign.pub` verifies with: the PEM
// public key, SHA-256 (cosign's LoadPublicKeyRaw).
func Verifier(t testing.TB, pub []byte) signature.Verifier {
	t.Helper()
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(k, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// LineDiff shows the first line where got and want differ.
func LineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, want %q (%d and %d lines)", i+1, gl, wl, len(g), len(w))
		}
	}
	return "no line differs"
}
