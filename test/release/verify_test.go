package release

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/cosign/attestation"
	"github.com/sigstore/cosign/v3/pkg/oci"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/signature"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/file"
	orasremote "oras.land/oras-go/v2/registry/remote"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/hack/release/publish"
	"github.com/c5c3/glance-operator/hack/release/publish/publishtest"
)

// password is the signing key's, as COSIGN_PASSWORD gives it.
const password = "release test"

// blobStore is the registry's blob storage, which the test can corrupt: a
// registry, or a mirror between it and a cluster, that serves other bytes
// under a blob's digest.
type blobStore struct {
	mu    sync.Mutex
	blobs map[string][]byte
}

func (s *blobStore) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[h.String()]
	if !ok {
		return nil, ggcrregistry.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(bytes.Clone(b))), nil
}

func (s *blobStore) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[h.String()]
	if !ok {
		return 0, ggcrregistry.ErrNotFound
	}
	return int64(len(b)), nil
}

func (s *blobStore) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[h.String()] = b
	return nil
}

// flip changes one byte of the blob h and returns the undo.
func (s *blobStore) flip(t *testing.T, h string) func() {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[h]
	if !ok || len(b) == 0 {
		t.Fatalf("the registry has no blob %s", h)
	}
	orig := bytes.Clone(b)
	b[len(b)/2] ^= 0x01
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.blobs[h] = orig
	}
}

// checkOpts are `cosign verify --key cosign.pub --insecure-ignore-tlog=true`'s
// (claims checked, as by default), claim the claim verifier of signatures
// or attestations.
func checkOpts(ctx context.Context, v signature.Verifier, claim func(oci.Signature, v1.Hash, map[string]any) error) *cosign.CheckOpts {
	return &cosign.CheckOpts{
		SigVerifier:        v,
		IgnoreTlog:         true,
		ClaimVerifier:      claim,
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remote.WithContext(ctx))},
	}
}

// verify is `cosign verify --key cosign.pub --insecure-ignore-tlog=true REF`:
// cosign 3 looks for Sigstore bundles among the referrers first and, finding
// none, reads the signatures tagged sha256-HEX.sig, as cosign 2 does.
func verify(ctx context.Context, v signature.Verifier, ref string) ([]oci.Signature, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return nil, err
	}
	co := checkOpts(ctx, v, cosign.SimpleClaimVerifier)
	if bundles, _, err := cosign.GetBundles(ctx, r, co.RegistryClientOpts, name.Insecure); err == nil && len(bundles) > 0 {
		return nil, fmt.Errorf("%s has %d Sigstore bundles; the release signs in the .sig layout", ref, len(bundles))
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, r, co)
	return sigs, err
}

// verifyProvenance is `cosign verify-attestation --key cosign.pub
// --insecure-ignore-tlog=true --type slsaprovenance1 REF`: cosign verifies
// the attestations (the DSSE signature, the statement's subject the
// digest REF resolves to), then the statements of the predicate type are
// kept, as the command's policy.AttestationToPayloadJSON keeps them
// (mirrored in predicateStatement: cosign's pkg/policy would bring the
// cloud registries' credential helpers of its CLI options into this module).
func verifyProvenance(ctx context.Context, v signature.Verifier, ref string) ([]provenance, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return nil, err
	}
	atts, _, err := cosign.VerifyImageAttestations(ctx, r, checkOpts(ctx, v, cosign.IntotoSubjectClaimVerifier), name.Insecure)
	if err != nil {
		return nil, err
	}
	var out []provenance
	for _, a := range atts {
		payload, err := predicateStatement(a, slsaProvenance1)
		if err != nil {
			return nil, err
		}
		if payload == nil {
			continue // another predicate type
		}
		var p provenance
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none of the %d attestations of %s is an SLSA provenance v1", len(atts), ref)
	}
	return out, nil
}

// slsaProvenance1 is what cosign's --type slsaprovenance1 stands for.
const slsaProvenance1 = "https://slsa.dev/provenance/v1"

// predicateStatement is the in-toto statement of a verified attestation
// when its predicate type is predicateType, nil when it is another, as
// cosign's policy.AttestationToPayloadJSON reads it: the envelope's
// payload, parsed as cosign's attestation.Statement.
func predicateStatement(a oci.Signature, predicateType string) ([]byte, error) {
	p, err := a.Payload()
	if err != nil {
		return nil, err
	}
	var envelope struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(p, &envelope); err != nil {
		return nil, fmt.Errorf("unmarshaling payload data: %w", err)
	}
	decoded, err := base64.StdEncoding.DecodeString(envelope.Payload)
	if err != nil {
		return nil, fmt.Errorf("decoding payload: %w", err)
	}
	statement := &attestation.Statement{}
	if err := statement.UnmarshalJSON(decoded); err != nil {
		return nil, fmt.Errorf("unmarshal in-toto statement: %w", err)
	}
	if statement.PredicateType != predicateType {
		return nil, nil
	}
	return statement.MarshalJSON()
}

// provenance is what the test reads of a statement.
type provenance struct {
	Subject []struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	PredicateType string `json:"predicateType"`
	Predicate     struct {
		BuildDefinition struct {
			ExternalParameters struct {
				Source struct {
					Digest map[string]string `json:"digest"`
				} `json:"source"`
				Arches []string `json:"arches"`
			} `json:"externalParameters"`
			InternalParameters struct {
				GoVersion string `json:"goVersion"`
			} `json:"internalParameters"`
			ResolvedDependencies []struct {
				URI    string            `json:"uri"`
				Digest map[string]string `json:"digest"`
			} `json:"resolvedDependencies"`
		} `json:"buildDefinition"`
		RunDetails struct {
			Builder struct {
				ID string `json:"id"`
			} `json:"builder"`
		} `json:"runDetails"`
	} `json:"predicate"`
}

// TestReleaseVerifiesWithCosign releases, signed with a key that `cosign
// generate-key-pair` makes, to a registry on loopback, and verifies it as
// docs/release.md tells a platform team to, with cosign's verification:
// each image index, the chart and the static manifests by tag, their
// signatures and SLSA provenance against the public key, no transparency
// log; the static manifests pulled as `oras pull` does are what `helm
// template` prints of the released chart, the indexes pinned. Then it
// tampers, as a registry or a mirror could, and each verification fails.
func TestReleaseVerifiesWithCosign(t *testing.T) {
	ctx := t.Context()
	blobs := &blobStore{blobs: map[string][]byte{}}
	srv := httptest.NewServer(ggcrregistry.New(
		ggcrregistry.WithReferrersSupport(true),
		ggcrregistry.WithBlobHandler(blobs),
		ggcrregistry.Logger(log.New(io.Discard, "", 0)),
	))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	reg := host + "/c5c3"

	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(password), nil })
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "cosign.key")
	if err := os.WriteFile(keyPath, keys.PrivateBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := publish.LoadSigner(keyPath, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tree := publishtest.Snapshot(t, root)
	revision := strings.TrimSpace(publishtest.Git(t, tree, "rev-parse", "HEAD"))
	out := t.TempDir()
	rel, err := publish.Publish(ctx, publish.Options{
		Registry:       reg,
		PlainHTTP:      true,
		RegistryConfig: filepath.Join(t.TempDir(), "config.json"),
		Images:         ociimage.Options{OutDir: out, ModuleRoot: tree},
		Signer:         signer,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rel.String())
	v := publishtest.Verifier(t, keys.PublicBytes)

	type artifact struct {
		what, ref, digest string
		// provenance checks the artifact's own fields.
		provenance func(provenance) error
	}
	var artifacts []artifact
	for _, img := range rel.Images {
		_, d, _ := strings.Cut(img.Reference, "@")
		artifacts = append(artifacts, artifact{img.Name, img.Tagged, d, func(p provenance) error {
			if got := p.Predicate.BuildDefinition.ExternalParameters.Arches; !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
				return fmt.Errorf("built for %v", got)
			}
			modules := 0
			for _, d := range p.Predicate.BuildDefinition.ResolvedDependencies {
				if strings.HasPrefix(d.URI, "pkg:golang/") && d.Digest["goModuleH1"] != "" {
					modules++
				}
			}
			if modules < 10 {
				return fmt.Errorf("%d Go modules among the materials", modules)
			}
			return nil
		}})
	}
	chartRef := strings.TrimPrefix(rel.Chart, "oci://") + ":" + rel.ChartVersion
	pinsImages := func(p provenance) error {
		for _, img := range rel.Images {
			if !slices.ContainsFunc(p.Predicate.BuildDefinition.ResolvedDependencies, func(d struct {
				URI    string            `json:"uri"`
				Digest map[string]string `json:"digest"`
			}) bool {
				return d.URI == img.Reference
			}) {
				return fmt.Errorf("the materials do not name %s", img.Reference)
			}
		}
		return nil
	}
	artifacts = append(artifacts,
		artifact{"the chart", chartRef, rel.ChartDigest, pinsImages},
		artifact{"the manifests", rel.Manifests, rel.ManifestsDigest, pinsImages})

	for _, a := range artifacts {
		t.Run("verify "+a.what, func(t *testing.T) {
			sigs, err := verify(ctx, v, a.ref)
			if err != nil {
				t.Fatalf("cosign verify %s: %v", a.ref, err)
			}
			if len(sigs) != 1 {
				t.Errorf("cosign verified %d signatures of %s, want 1", len(sigs), a.ref)
			}
			provs, err := verifyProvenance(ctx, v, a.ref)
			if err != nil {
				t.Fatalf("cosign verify-attestation --type slsaprovenance1 %s: %v", a.ref, err)
			}
			for _, p := range provs {
				repo, _, _ := strings.Cut(a.ref, "@")
				repo = repo[:strings.LastIndex(repo, ":")]
				if len(p.Subject) != 1 || p.Subject[0].Name != repo || "sha256:"+p.Subject[0].Digest["sha256"] != a.digest {
					t.Errorf("the provenance of %s is about %+v, want %s@%s", a.ref, p.Subject, repo, a.digest)
				}
				b := p.Predicate.BuildDefinition
				if b.ExternalParameters.Source.Digest["gitCommit"] != revision || b.InternalParameters.GoVersion == "" ||
					p.Predicate.RunDetails.Builder.ID != publish.BuilderID || len(b.ResolvedDependencies) == 0 || b.ResolvedDependencies[0].Digest["gitCommit"] != revision {
					t.Errorf("the provenance of %s does not name the commit %s, the Go toolchain and the builder: %+v", a.ref, revision, p.Predicate)
				}
				if err := a.provenance(p); err != nil {
					t.Errorf("the provenance of %s: %v", a.ref, err)
				}
			}
		})
	}

	t.Run("manifests are helm template's", func(t *testing.T) {
		files := orasPull(t, rel.Manifests)
		if !bytes.Contains(files[publish.ManifestsFile], files[publish.CRDsFile]) || !bytes.Contains(files[publish.CRDsFile], []byte("kind: CustomResourceDefinition")) {
			t.Errorf("%s is not the CRDs of %s", publish.CRDsFile, publish.ManifestsFile)
		}
		for _, img := range rel.Images {
			if !bytes.Contains(files[publish.ManifestsFile], []byte("image: "+img.Reference+"\n")) {
				t.Errorf("%s does not pin %s", publish.ManifestsFile, img.Reference)
			}
		}
		rendered := helmTemplate(t, rel.Chart, rel.ChartVersion)
		if got := string(files[publish.ManifestsFile]); got != rendered {
			t.Errorf("%s differs from `helm template`: %s", publish.ManifestsFile, publishtest.LineDiff(got, rendered))
		}
	})

	// Tampering: each case fails a verification that passed above, and is
	// undone before the next.
	operator, webhook := rel.Images[0], rel.Images[1]
	_, operatorDigest, _ := strings.Cut(operator.Reference, "@")
	_, webhookDigest, _ := strings.Cut(webhook.Reference, "@")
	operatorRepo := repository(t, strings.Split(operator.Reference, "@")[0])

	t.Run("another key", func(t *testing.T) {
		other, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("other"), nil })
		if err != nil {
			t.Fatal(err)
		}
		w := publishtest.Verifier(t, other.PublicBytes)
		for _, a := range artifacts {
			if _, err := verify(ctx, w, a.ref); err == nil {
				t.Errorf("another key verifies the signature of %s", a.ref)
			}
			if _, err := verifyProvenance(ctx, w, a.ref); err == nil {
				t.Errorf("another key verifies the provenance of %s", a.ref)
			}
		}
	})

	t.Run("a byte of the signature's payload", func(t *testing.T) {
		layer := signatureLayer(t, operatorRepo, operatorDigest, ".sig")
		defer blobs.flip(t, layer.Digest.String())()
		if _, err := verify(ctx, v, operator.Tagged); err == nil {
			t.Errorf("cosign verified %s with its signature's payload changed", operator.Tagged)
		} else {
			t.Log(err)
		}
	})

	t.Run("a byte of the provenance", func(t *testing.T) {
		layer := signatureLayer(t, operatorRepo, operatorDigest, ".att")
		defer blobs.flip(t, layer.Digest.String())()
		if _, err := verifyProvenance(ctx, v, operator.Tagged); err == nil {
			t.Errorf("cosign verified the provenance of %s with a byte of its envelope changed", operator.Tagged)
		} else {
			t.Log(err)
		}
	})

	t.Run("a byte of the signature", func(t *testing.T) {
		// The signature annotation is in the .sig manifest: pushed again
		// with one character of it changed.
		tag := "sha256-" + strings.TrimPrefix(operatorDigest, "sha256:") + ".sig"
		body := fetchManifest(t, operatorRepo, tag)
		var m ocispec.Manifest
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		sig, err := base64.StdEncoding.DecodeString(m.Layers[0].Annotations["dev.cosignproject.cosign/signature"])
		if err != nil || len(sig) == 0 {
			t.Fatalf("the signature annotation of %s: %v", tag, err)
		}
		sig[len(sig)/2] ^= 0x01
		m.Layers[0].Annotations["dev.cosignproject.cosign/signature"] = base64.StdEncoding.EncodeToString(sig)
		defer pushManifest(t, operatorRepo, body, tag)
		pushManifest(t, operatorRepo, mustJSON(t, m), tag)
		if _, err := verify(ctx, v, operator.Tagged); err == nil {
			t.Errorf("cosign verified %s with a byte of its signature changed", operator.Tagged)
		} else {
			t.Log(err)
		}
	})

	t.Run("re-tagged to another image", func(t *testing.T) {
		// glance-operator's tag moved to the webhook's index, then that
		// index given glance-operator's signature.
		webhookRepo := repository(t, strings.Split(webhook.Reference, "@")[0])
		tag := operator.Tagged[strings.LastIndex(operator.Tagged, ":")+1:]
		if _, err := oras.Copy(ctx, webhookRepo, webhookDigest, operatorRepo, tag, oras.DefaultCopyOptions); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := oras.Tag(ctx, operatorRepo, operatorDigest, tag); err != nil {
				t.Fatal(err)
			}
		}()
		if _, err := verify(ctx, v, operator.Tagged); err == nil {
			t.Errorf("cosign verified %s re-tagged to %s", operator.Tagged, webhookDigest)
		} else {
			t.Log(err)
		}
		signed := "sha256-" + strings.TrimPrefix(operatorDigest, "sha256:")
		moved := "sha256-" + strings.TrimPrefix(webhookDigest, "sha256:")
		pushManifest(t, operatorRepo, fetchManifest(t, operatorRepo, signed+".sig"), moved+".sig")
		pushManifest(t, operatorRepo, fetchManifest(t, operatorRepo, signed+".att"), moved+".att")
		if _, err := verify(ctx, v, operator.Tagged); err == nil {
			t.Errorf("cosign verified %s re-tagged to %s, with the signature of %s", operator.Tagged, webhookDigest, operatorDigest)
		} else {
			t.Log(err)
		}
		if _, err := verifyProvenance(ctx, v, operator.Tagged); err == nil {
			t.Errorf("cosign verified the provenance of %s re-tagged to %s", operator.Tagged, webhookDigest)
		} else {
			t.Log(err)
		}
	})

	t.Run("a byte of the manifests", func(t *testing.T) {
		// The manifests' artifact pushed again under its tag with one byte
		// of glance-operator.yaml changed.
		repo := repository(t, rel.Manifests[:strings.LastIndex(rel.Manifests, ":")])
		tag := rel.ChartVersion
		body := fetchManifest(t, repo, tag)
		var m ocispec.Manifest
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		yaml := bytes.Clone(blob(t, repo, m.Layers[0]))
		yaml[len(yaml)/2] ^= 0x01
		desc, err := oras.PushBytes(ctx, repo, publish.ManifestsMediaType, yaml)
		if err != nil {
			t.Fatal(err)
		}
		desc.Annotations = m.Layers[0].Annotations
		m.Layers[0] = desc
		defer pushManifest(t, repo, body, tag)
		pushManifest(t, repo, mustJSON(t, m), tag)
		if _, err := verify(ctx, v, rel.Manifests); err == nil {
			t.Errorf("cosign verified %s with a byte of %s changed", rel.Manifests, publish.ManifestsFile)
		} else {
			t.Log(err)
		}
	})

	t.Run("a byte of the chart", func(t *testing.T) {
		// One byte of the chart archive changed, pushed under its version.
		repo := repository(t, strings.TrimSuffix(chartRef, ":"+rel.ChartVersion))
		body := fetchManifest(t, repo, rel.ChartVersion)
		var m ocispec.Manifest
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		archive := bytes.Clone(blob(t, repo, m.Layers[0]))
		archive[len(archive)/2] ^= 0x01
		desc, err := oras.PushBytes(ctx, repo, m.Layers[0].MediaType, archive)
		if err != nil {
			t.Fatal(err)
		}
		m.Layers[0] = desc
		defer pushManifest(t, repo, body, rel.ChartVersion)
		pushManifest(t, repo, mustJSON(t, m), rel.ChartVersion)
		if _, err := verify(ctx, v, chartRef); err == nil {
			t.Errorf("cosign verified %s with a byte of the chart changed", chartRef)
		} else {
			t.Log(err)
		}
	})

	t.Run("untampered again", func(t *testing.T) {
		for _, a := range artifacts {
			if _, err := verify(ctx, v, a.ref); err != nil {
				t.Errorf("cosign verify %s after the undo: %v", a.ref, err)
			}
		}
	})
}

// repository is a repository of the loopback registry.
func repository(t *testing.T, ref string) *orasremote.Repository {
	t.Helper()
	r, err := orasremote.NewRepository(ref)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	return r
}

// fetchManifest is the manifest ref of repo, as the registry stores it.
func fetchManifest(t *testing.T, repo *orasremote.Repository, ref string) []byte {
	t.Helper()
	desc, rc, err := repo.FetchReference(t.Context(), ref)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || int64(len(b)) != desc.Size {
		t.Fatalf("%s: %d bytes of %d: %v", ref, len(b), desc.Size, err)
	}
	return b
}

// pushManifest tags a manifest's bytes as tag.
func pushManifest(t *testing.T, repo *orasremote.Repository, body []byte, tag string) {
	t.Helper()
	var m struct {
		MediaType string `json:"mediaType"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if _, err := oras.TagBytes(context.Background(), repo, m.MediaType, body, tag); err != nil {
		t.Fatalf("tagging %s: %v", tag, err)
	}
}

// blob reads a blob of repo.
func blob(t *testing.T, repo *orasremote.Repository, desc ocispec.Descriptor) []byte {
	t.Helper()
	rc, err := repo.Blobs().Fetch(t.Context(), desc)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signatureLayer is the one layer of the manifest tagged
// sha256-HEX+suffix in repo.
func signatureLayer(t *testing.T, repo *orasremote.Repository, digest, suffix string) ocispec.Descriptor {
	t.Helper()
	var m ocispec.Manifest
	if err := json.Unmarshal(fetchManifest(t, repo, "sha256-"+strings.TrimPrefix(digest, "sha256:")+suffix), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%d layers under %s, want 1", len(m.Layers), suffix)
	}
	return m.Layers[0]
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orasPull pulls an artifact into a directory as `oras pull REF` does, with
// oras-go's file store, and returns the files it wrote.
func orasPull(t *testing.T, ref string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	store, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	i := strings.LastIndex(ref, ":")
	desc, err := oras.Copy(t.Context(), repository(t, ref[:i]), ref[i+1:], store, ref[i+1:], oras.DefaultCopyOptions)
	if err != nil {
		t.Fatalf("oras pull %s: %v", ref, err)
	}
	if desc.ArtifactType != publish.ManifestsArtifactType && desc.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("%s is a %s", ref, desc.MediaType)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	if len(out) != 2 || out[publish.ManifestsFile] == nil || out[publish.CRDsFile] == nil {
		t.Fatalf("oras pull %s wrote %d files, want %s and %s", ref, len(out), publish.ManifestsFile, publish.CRDsFile)
	}
	return out
}

// helmTemplate runs the helm CLI (this module's tool) as docs/release.md
// does: `helm template glance-operator oci://… --version V --namespace
// glance-system --kube-version 1.37.2`, Helm's directories in a scratch
// directory.
func helmTemplate(t *testing.T, chart, version string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "tool", "helm", "template", publish.ManifestsReleaseName, chart,
		"--version", version, "--plain-http", "--namespace", publish.ManifestsNamespace, "--kube-version", publish.ManifestsKubeVersion)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", chart, err, stderr.String())
	}
	return string(out)
}
