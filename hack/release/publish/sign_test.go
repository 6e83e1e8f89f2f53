package publish

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/hack/release/publish/publishtest"
)

// cosignKey writes a key pair as `cosign generate-key-pair` does, the
// private key encrypted with password (sigstore's PEM type ENCRYPTED
// SIGSTORE PRIVATE KEY, the same function cosign calls), and returns the
// private key's path and the public key's PEM.
func cosignKey(t *testing.T, password string) (string, []byte) {
	t.Helper()
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte(password)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(priv, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Fatalf("not cosign's key format:\n%s", priv)
	}
	path := filepath.Join(t.TempDir(), "cosign.key")
	if err := os.WriteFile(path, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}

func writePEM(t *testing.T, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadSigner: cosign's encrypted keys load with their password, an
// empty one too, and sign what their public key verifies; an unencrypted
// PEM ECDSA key loads; a missing or wrong password, an ed25519 key and a
// file that holds no key are refused, the error saying why.
func TestLoadSigner(t *testing.T) {
	path, pub := cosignKey(t, "correct horse")
	s, err := LoadSigner(path, []byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.PublicKeyPEM(); err != nil || !bytes.Equal(got, pub) {
		t.Errorf("the public key is\n%s, want cosign.pub's\n%s (%v)", got, pub, err)
	}
	verifier := publishtest.Verifier(t, pub)
	msg := []byte("payload")
	sig, err := s.sv.SignMessage(bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg)); err != nil {
		t.Errorf("cosign.pub does not verify the signature: %v", err)
	}

	empty, _ := cosignKey(t, "")
	if _, err := LoadSigner(empty, []byte("")); err != nil {
		t.Errorf("a key with an empty password: %v", err)
	}

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(writePEM(t, "PRIVATE KEY", der), nil); err != nil {
		t.Errorf("an unencrypted PKCS #8 ECDSA key: %v", err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edDER, err := x509.MarshalPKCS8PrivateKey(ed)
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		password   []byte
		want       []string
	}{
		{"no password", path, nil, []string{path, "encrypted", SigningKeyPasswordEnv}},
		{"wrong password", path, []byte("wrong"), []string{path, "decrypting", SigningKeyPasswordEnv}},
		{"empty password of a key with one", path, []byte(""), []string{path, "decrypting"}},
		{"ed25519", writePEM(t, "PRIVATE KEY", edDER), nil, []string{"ed25519", "ECDSA"}},
		{"no key", garbage, nil, []string{garbage, "no PEM private key"}},
		{"missing", filepath.Join(t.TempDir(), "absent.key"), nil, []string{"absent.key"}},
	} {
		_, err := LoadSigner(tc.path, tc.password)
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error %q does not say %q", tc.name, err, w)
			}
		}
	}
}

// TestSignKeepsSignatures: signing and attesting a digest again with the
// same key changes nothing on the registry; another key's signature is
// added beside the first, which stays; the signature is cosign's payload
// naming the digest, which the public key verifies.
func TestSignKeepsSignatures(t *testing.T) {
	reg, _ := loopbackRegistry(t)
	ctx := t.Context()
	repoName := reg + "/glance-operator"
	repo, err := remote.NewRepository(repoName)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	subject := digest.FromString("an image index")

	path, pub := cosignKey(t, "pw")
	s, err := LoadSigner(path, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	statement := []byte(`{"_type":"https://in-toto.io/Statement/v1"}`)
	first, err := s.sign(ctx, repo, repoName, subject)
	if err != nil {
		t.Fatal(err)
	}
	firstAtt, err := s.attest(ctx, repo, subject, SLSAProvenanceType, statement)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.sign(ctx, repo, repoName, subject)
	if err != nil {
		t.Fatal(err)
	}
	againAtt, err := s.attest(ctx, repo, subject, SLSAProvenanceType, statement)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || againAtt != firstAtt {
		t.Errorf("signing again moved the signature from %s to %s, the attestation from %s to %s", first, again, firstAtt, againAtt)
	}
	sigTag, attTag := signatureTags(repoName, subject)
	if want := repoName + ":sha256-" + subject.Encoded() + ".sig"; sigTag != want {
		t.Errorf("the signature tag is %s, want %s", sigTag, want)
	}
	layers := signatureLayers(t, repo, strings.TrimPrefix(sigTag, repoName+":"))
	if len(layers) != 1 {
		t.Fatalf("%d signatures, want 1", len(layers))
	}
	checkSignature(t, repo, layers[0], pub, repoName, subject)
	if att := signatureLayers(t, repo, strings.TrimPrefix(attTag, repoName+":")); len(att) != 1 || att[0].MediaType != dsseMediaType || att[0].Annotations[annotationPredicate] != SLSAProvenanceType {
		t.Errorf("the attestation's layers are %+v, want one DSSE envelope of %s", att, SLSAProvenanceType)
	}

	otherPath, otherPub := cosignKey(t, "other")
	other, err := LoadSigner(otherPath, []byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.sign(ctx, repo, repoName, subject); err != nil {
		t.Fatal(err)
	}
	layers = signatureLayers(t, repo, strings.TrimPrefix(sigTag, repoName+":"))
	if len(layers) != 2 {
		t.Fatalf("%d signatures after a second key's, want 2", len(layers))
	}
	checkSignature(t, repo, layers[0], pub, repoName, subject)
	checkSignature(t, repo, layers[1], otherPub, repoName, subject)
}

// signatureLayers are the layers of the manifest tagged tag.
func signatureLayers(t *testing.T, repo *remote.Repository, tag string) []ocispec.Descriptor {
	t.Helper()
	_, body, err := fetchReference(t, repo, tag)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m.Layers
}

func fetchReference(t *testing.T, repo *remote.Repository, ref string) (ocispec.Descriptor, []byte, error) {
	t.Helper()
	desc, rc, err := repo.FetchReference(t.Context(), ref)
	if err != nil {
		return desc, nil, err
	}
	defer rc.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(rc)
	return desc, b.Bytes(), err
}

// checkSignature: the layer is cosign's simple-signing payload naming
// repoName@subject, its signature annotation verified by pub.
func checkSignature(t *testing.T, repo *remote.Repository, l ocispec.Descriptor, pub []byte, repoName string, subject digest.Digest) {
	t.Helper()
	if l.MediaType != simpleSigningMediaType {
		t.Errorf("a signature layer of media type %s", l.MediaType)
	}
	blob, err := fetchAll(t.Context(), repo, l)
	if err != nil {
		t.Fatal(err)
	}
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(blob, &p); err != nil {
		t.Fatal(err)
	}
	if p.Critical.Image.DockerManifestDigest != subject.String() || p.Critical.Identity.DockerReference != repoName || p.Critical.Type != payload.CosignSignatureType {
		t.Errorf("the payload is %s, want cosign's naming %s@%s", blob, repoName, subject)
	}
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[annotationSignature])
	if err != nil {
		t.Fatal(err)
	}
	if err := publishtest.Verifier(t, pub).VerifySignature(bytes.NewReader(sig), bytes.NewReader(blob)); err != nil {
		t.Errorf("the public key does not verify the signature: %v", err)
	}
}

// TestSignedReleaseIsACommit: a Signer with UncommittedTree is refused
// before anything is built.
func TestSignedReleaseIsACommit(t *testing.T) {
	path, _ := cosignKey(t, "pw")
	s, err := LoadSigner(path, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	_, err = Publish(t.Context(), Options{Registry: "127.0.0.1:1/c5c3", Signer: s, UncommittedTree: true, Images: ociimage.Options{OutDir: out}})
	if err == nil || !strings.Contains(err.Error(), "UncommittedTree") {
		t.Errorf("Publish: %v, want a signed release of an uncommitted tree refused", err)
	}
}
