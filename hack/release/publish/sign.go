package publish

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
)

// cosign's layout of signatures and attestations, which `cosign verify` and
// `cosign verify-attestation` read by default (cosign 2 and 3 alike, the
// latter when the artifact has no Sigstore bundle referrer): an image
// manifest tagged sha256-HEX.sig (.att) in the signed artifact's repository,
// one layer per signature.
const (
	// simpleSigningMediaType is a signature layer's: the simple-signing
	// payload naming the signed manifest by digest, its signature in the
	// layer's annotationSignature.
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// dsseMediaType is an attestation layer's: a DSSE envelope of an in-toto
	// statement, signed within (annotationSignature is empty).
	dsseMediaType          = "application/vnd.dsse.envelope.v1+json"
	inTotoPayloadType      = "application/vnd.in-toto+json"
	annotationSignature    = "dev.cosignproject.cosign/signature"
	annotationPredicate    = "predicateType"
	signatureSuffix        = ".sig"
	attestationSuffix      = ".att"
	maxSignatureLayers     = 1000
	maxSignatureLayerBytes = 4 << 20
)

// SigningKeyPasswordEnv names the environment variable that holds the
// password of an encrypted signing key, as cosign reads it.
const SigningKeyPasswordEnv = "COSIGN_PASSWORD"

// Signer signs what a release pushes with one private key, as `cosign sign
// --key` and `cosign attest --key` do without a transparency log: each
// signature and attestation is verified with the public key alone, `cosign
// verify --key cosign.pub --insecure-ignore-tlog=true`.
type Signer struct {
	sv signature.SignerVerifier
}

// LoadSigner reads a private key: cosign's (`cosign generate-key-pair`,
// PEM "ENCRYPTED SIGSTORE PRIVATE KEY" or the older "ENCRYPTED COSIGN
// PRIVATE KEY", decrypted with password), or an unencrypted PEM key
// ("PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"). The key must be
// ECDSA or RSA; signatures are over SHA-256, as cosign verifies them. A nil
// password means none was given, which an encrypted key refuses.
func LoadSigner(path string, password []byte) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM private key (make one with `cosign generate-key-pair`)", path)
	}
	encrypted := strings.HasPrefix(block.Type, "ENCRYPTED ")
	if encrypted && password == nil {
		return nil, fmt.Errorf("%s is encrypted: give its password in %s", path, SigningKeyPasswordEnv)
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(b, func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		if encrypted {
			return nil, fmt.Errorf("%s: decrypting with the password of %s: %w", path, SigningKeyPasswordEnv, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := NewSigner(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// NewSigner signs with an ECDSA or RSA private key.
func NewSigner(key crypto.PrivateKey) (*Signer, error) {
	switch key.(type) {
	case *ecdsa.PrivateKey, *rsa.PrivateKey:
	default:
		// cosign verifies an ed25519 key's signatures as ed25519ph, which
		// sigstore's signer of this module does not make.
		return nil, fmt.Errorf("a %T key; sign with ECDSA (`cosign generate-key-pair`) or RSA", key)
	}
	sv, err := signature.LoadSignerVerifier(key, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv}, nil
}

// PublicKeyPEM is the public key as cosign writes cosign.pub.
func (s *Signer) PublicKeyPEM() ([]byte, error) {
	pub, err := s.sv.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// sign pushes the signature of the manifest subject of repo: the
// simple-signing payload cosign signs, naming repoName and the digest. It
// returns the digest of the signature manifest.
func (s *Signer) sign(ctx context.Context, repo *remote.Repository, repoName string, subject digest.Digest) (digest.Digest, error) {
	ref, err := name.NewDigest(repoName + "@" + subject.String())
	if err != nil {
		return "", err
	}
	body, err := payload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		return "", err
	}
	sig, err := s.sv.SignMessage(bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("signing %s: %w", ref, err)
	}
	layer := signatureLayer{
		mediaType: simpleSigningMediaType,
		payload:   body,
		annotations: map[string]string{
			annotationSignature: base64.StdEncoding.EncodeToString(sig),
		},
	}
	// Signed before by this key: the same payload, a signature it verifies.
	same := func(existing ocispec.Descriptor, blob []byte) bool {
		sig, err := base64.StdEncoding.DecodeString(existing.Annotations[annotationSignature])
		return err == nil && len(sig) > 0 && bytes.Equal(blob, body) &&
			s.sv.VerifySignature(bytes.NewReader(sig), bytes.NewReader(blob)) == nil
	}
	d, err := attach(ctx, repo, subject, signatureSuffix, layer, same)
	if err != nil {
		return "", fmt.Errorf("the signature of %s: %w", ref, err)
	}
	return d, nil
}

// attest pushes statement, an in-toto statement about the manifest subject
// of repo, in a DSSE envelope this key signs, as `cosign attest` does. It
// returns the digest of the attestation manifest.
func (s *Signer) attest(ctx context.Context, repo *remote.Repository, subject digest.Digest, predicateType string, statement []byte) (digest.Digest, error) {
	envelope, err := dsse.WrapSigner(s.sv, inTotoPayloadType).SignMessage(bytes.NewReader(statement))
	if err != nil {
		return "", fmt.Errorf("signing the attestation of %s: %w", subject, err)
	}
	layer := signatureLayer{
		mediaType: dsseMediaType,
		payload:   envelope,
		annotations: map[string]string{
			annotationSignature: "",
			annotationPredicate: predicateType,
		},
	}
	// Attested before by this key: an envelope it verifies of the same
	// statement.
	verifier := dsse.WrapVerifier(s.sv)
	same := func(_ ocispec.Descriptor, blob []byte) bool {
		var e struct {
			PayloadType string `json:"payloadType"`
			Payload     string `json:"payload"`
		}
		if json.Unmarshal(blob, &e) != nil || e.PayloadType != inTotoPayloadType {
			return false
		}
		p, err := base64.StdEncoding.DecodeString(e.Payload)
		return err == nil && bytes.Equal(p, statement) && verifier.VerifySignature(bytes.NewReader(blob), nil) == nil
	}
	d, err := attach(ctx, repo, subject, attestationSuffix, layer, same)
	if err != nil {
		return "", fmt.Errorf("the attestation of %s: %w", subject, err)
	}
	return d, nil
}

// signatureLayer is one signature or attestation.
type signatureLayer struct {
	mediaType   string
	payload     []byte
	annotations map[string]string
}

// attach adds layer to the manifest tagged sha256-HEX+suffix in repo, as
// cosign does: an image manifest whose layers are the signatures, its
// config an image config listing them, the existing signatures kept. When
// an existing layer of the same media type and annotations (the signature
// aside) is the same signature, as same tells, nothing is pushed: releasing
// a commit again leaves its signatures as they were. It returns the
// manifest's digest.
func attach(ctx context.Context, repo *remote.Repository, subject digest.Digest, suffix string, layer signatureLayer, same func(ocispec.Descriptor, []byte) bool) (digest.Digest, error) {
	tag := subject.Algorithm().String() + "-" + subject.Encoded() + suffix

	manifest := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest}
	manifest.SchemaVersion = 2
	config := v1.ConfigFile{RootFS: v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{}}}
	configMediaType := ocispec.MediaTypeImageConfig
	desc, rc, err := repo.FetchReference(ctx, tag)
	switch {
	case errors.Is(err, errdef.ErrNotFound):
	case err != nil:
		return "", err
	default:
		body, err := content.ReadAll(rc, desc)
		rc.Close()
		if err != nil {
			return "", err
		}
		if err := json.Unmarshal(body, &manifest); err != nil {
			return "", fmt.Errorf("%s: %w", tag, err)
		}
		if len(manifest.Layers) >= maxSignatureLayers {
			return "", fmt.Errorf("%s has %d layers already", tag, len(manifest.Layers))
		}
		for _, l := range manifest.Layers {
			if l.MediaType != layer.mediaType || l.Size > maxSignatureLayerBytes || !sameAnnotations(l.Annotations, layer.annotations) {
				continue
			}
			blob, err := fetchAll(ctx, repo, l)
			if err != nil {
				return "", fmt.Errorf("%s: %w", tag, err)
			}
			if same(l, blob) {
				return desc.Digest, nil
			}
		}
		if manifest.Config.Digest != "" {
			b, err := fetchAll(ctx, repo, manifest.Config)
			if err != nil {
				return "", fmt.Errorf("%s: %w", tag, err)
			}
			if err := json.Unmarshal(b, &config); err != nil {
				return "", fmt.Errorf("%s: the config: %w", tag, err)
			}
			configMediaType = manifest.Config.MediaType
		}
	}

	l := content.NewDescriptorFromBytes(layer.mediaType, layer.payload)
	l.Annotations = layer.annotations
	if err := pushBlob(ctx, repo, l, layer.payload); err != nil {
		return "", err
	}
	// What go-containerregistry's mutate.Append, which cosign uses, makes
	// of the config: the layer's diff ID and an empty history entry.
	config.RootFS.DiffIDs = append(config.RootFS.DiffIDs, v1.Hash{Algorithm: "sha256", Hex: l.Digest.Encoded()})
	config.History = append(config.History, v1.History{})
	configJSON, err := json.Marshal(config)
	if err != nil {
		return "", err
	}
	manifest.Config = content.NewDescriptorFromBytes(configMediaType, configJSON)
	if err := pushBlob(ctx, repo, manifest.Config, configJSON); err != nil {
		return "", err
	}
	manifest.Layers = append(manifest.Layers, l)
	body, err := json.Marshal(manifest)
	if err != nil {
		return "", err
	}
	mediaType := manifest.MediaType
	if mediaType == "" {
		mediaType = ocispec.MediaTypeImageManifest
	}
	desc = content.NewDescriptorFromBytes(mediaType, body)
	if err := repo.PushReference(ctx, desc, bytes.NewReader(body), tag); err != nil {
		return "", fmt.Errorf("pushing %s: %w", tag, err)
	}
	return desc.Digest, nil
}

// sameAnnotations: the layer has every annotation of want, the signature
// aside.
func sameAnnotations(have, want map[string]string) bool {
	for k, v := range want {
		if k == annotationSignature {
			continue
		}
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// pushBlob pushes a blob the repository does not have yet.
func pushBlob(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, b []byte) error {
	exists, err := repo.Blobs().Exists(ctx, desc)
	if err != nil || exists {
		return err
	}
	if err := repo.Blobs().Push(ctx, desc, bytes.NewReader(b)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return nil
}

// fetchAll reads a blob, checking its size and digest.
func fetchAll(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) ([]byte, error) {
	rc, err := repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return content.ReadAll(io.LimitReader(rc, desc.Size+1), desc)
}

// signatureTags are the tags a signed artifact's signature and attestation
// are under, for the release's report.
func signatureTags(repoName string, d digest.Digest) (sig, att string) {
	t := repoName + ":" + d.Algorithm().String() + "-" + d.Encoded()
	return t + signatureSuffix, t + attestationSuffix
}
