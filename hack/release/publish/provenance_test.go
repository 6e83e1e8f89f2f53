package publish

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/hack/release/publish/publishtest"
)

// checkSigned: the artifact repo@subject (repo under the registry's host)
// has under sha256-HEX.sig the signature signed reports, one layer, cosign's
// payload naming it, verified by pub; and under .att the attestation signed
// reports, one DSSE envelope pub verifies of an in-toto statement about
// the artifact with an SLSA provenance v1 predicate, which it returns.
func checkSigned(t *testing.T, reg, repo, subject string, signed Signed, pub []byte) statement {
	t.Helper()
	host, _, _ := strings.Cut(reg, "/")
	repoName := host + "/" + repo
	r, err := remote.NewRepository(repoName)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	d := digest.Digest(subject)
	sigTag, attTag := signatureTags(repoName, d)

	desc, body, err := fetchReference(t, r, strings.TrimPrefix(sigTag, repoName+":"))
	if err != nil {
		t.Fatalf("%s: %v", sigTag, err)
	}
	if desc.Digest.String() != signed.Signature {
		t.Errorf("%s is %s, the release printed %s", sigTag, desc.Digest, signed.Signature)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%s has %d signatures, want 1", sigTag, len(m.Layers))
	}
	checkSignature(t, r, m.Layers[0], pub, repoName, d)

	desc, body, err = fetchReference(t, r, strings.TrimPrefix(attTag, repoName+":"))
	if err != nil {
		t.Fatalf("%s: %v", attTag, err)
	}
	if desc.Digest.String() != signed.Provenance {
		t.Errorf("%s is %s, the release printed %s", attTag, desc.Digest, signed.Provenance)
	}
	m = ocispec.Manifest{}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != dsseMediaType || m.Layers[0].Annotations[annotationPredicate] != SLSAProvenanceType {
		t.Fatalf("%s is %s, want one DSSE envelope of %s", attTag, body, SLSAProvenanceType)
	}
	envelope, err := fetchAll(t.Context(), r, m.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := dsse.WrapVerifier(publishtest.Verifier(t, pub)).VerifySignature(bytes.NewReader(envelope), nil); err != nil {
		t.Fatalf("the public key does not verify the DSSE envelope of %s: %v", attTag, err)
	}
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(envelope, &e); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil || e.PayloadType != inTotoPayloadType {
		t.Fatalf("the envelope of %s has the payload type %s (%v)", attTag, e.PayloadType, err)
	}
	var st statement
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	want := []resource{{Name: repoName, Digest: map[string]string{"sha256": d.Encoded()}}}
	if st.Type != inTotoStatementType || st.PredicateType != SLSAProvenanceType || fmt.Sprint(st.Subject) != fmt.Sprint(want) {
		t.Errorf("the statement of %s is about %v (%s, %s), want %v", attTag, st.Subject, st.Type, st.PredicateType, want)
	}
	p := st.Predicate
	if p.BuildDefinition.BuildType != BuildType || p.RunDetails.Builder.ID != BuilderID || p.RunDetails.Builder.Version["go"] != runtime.Version() {
		t.Errorf("the provenance of %s names the build type %s and the builder %+v", repoName, p.BuildDefinition.BuildType, p.RunDetails.Builder)
	}
	return st
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkImageProvenance: the provenance names the commit as the source, the
// registry, the image's package and both architectures, the Go toolchain
// and each architecture's build settings, and as materials the commit, the
// Go standard library, modules (each with its go.sum hash) and the CA
// bundle the image ships.
func checkImageProvenance(t *testing.T, st statement, reg, revision string, img ociimage.Image, modules []string, ca caBundle) {
	t.Helper()
	b := st.Predicate.BuildDefinition
	ext := b.ExternalParameters
	if ext.Source.Digest["gitCommit"] != revision || ext.Source.URI != "git+"+ociimage.SourceURL || ext.Registry != reg ||
		ext.Artifact != img.Name || ext.Package != img.Package || !slices.Equal(ext.Arches, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the external parameters are %+v, want the source %s, the registry %s, %s of %s for linux/amd64 and linux/arm64", ext, revision, reg, img.Name, img.Package)
	}
	if st.Predicate.RunDetails.Builder.Version["hack/release"] != revision {
		t.Errorf("the builder is %+v, want hack/release of %s", st.Predicate.RunDetails.Builder, revision)
	}
	in := b.InternalParameters
	if in.GoVersion != runtime.Version() {
		t.Errorf("the provenance names %s, want %s", in.GoVersion, runtime.Version())
	}
	for _, arch := range []string{"amd64", "arm64"} {
		s := in.BuildSettings["linux/"+arch]
		if s["GOOS"] != "linux" || s["GOARCH"] != arch || s["CGO_ENABLED"] != "0" || s["-trimpath"] != "true" {
			t.Errorf("the build settings of linux/%s are %v", arch, s)
		}
	}

	deps := b.ResolvedDependencies
	if len(deps) < 3 || deps[0].URI != "git+"+ociimage.SourceURL+"@"+revision || deps[0].Digest["gitCommit"] != revision {
		t.Fatalf("the materials %v do not start with the commit %s", deps, revision)
	}
	var got []string
	var stdlib, bundle bool
	for _, d := range deps[1:] {
		switch {
		case d.URI == "pkg:golang/stdlib@"+runtime.Version():
			stdlib = true
		case strings.HasPrefix(d.URI, "pkg:golang/"):
			got = append(got, strings.TrimPrefix(d.URI, "pkg:golang/"))
			if !hexSHA256.MatchString(d.Digest["goModuleH1"]) {
				t.Errorf("the material %s has the digests %v, want its go.sum hash as goModuleH1", d.URI, d.Digest)
			}
		case d.Name == ociimage.CABundle:
			bundle = d.Digest["sha256"] == ca.SHA256
		}
	}
	if !slices.Equal(got, modules) {
		t.Errorf("the materials name the modules\n%v\nwant, as go list -deps gives them for both architectures,\n%v", got, modules)
	}
	if !stdlib || !bundle {
		t.Errorf("the materials %v lack the Go standard library %s or %s of SHA-256 %s", deps, runtime.Version(), ociimage.CABundle, ca.SHA256)
	}
}

// checkDependencies: the materials of a chart's or manifests' provenance
// are the commit and the released indexes by digest.
func checkDependencies(t *testing.T, st statement, what string, images []Image) {
	t.Helper()
	for _, img := range images {
		_, d, _ := strings.Cut(img.Reference, "@")
		if !slices.ContainsFunc(st.Predicate.BuildDefinition.ResolvedDependencies, func(r resource) bool {
			return r.URI == img.Reference && "sha256:"+r.Digest["sha256"] == d
		}) {
			t.Errorf("the provenance of %s does not name %s among its materials: %v", what, img.Reference, st.Predicate.BuildDefinition.ResolvedDependencies)
		}
	}
}

// pullManifests fetches the static manifests' artifact, tagged tag, as
// `oras pull` does and returns its files by title.
func pullManifests(t *testing.T, dist ociimage.Distribution, repo, tag, want string) map[string][]byte {
	t.Helper()
	body, d, err := dist.Get(t.Context(), repo, "manifests/"+tag, string(types.OCIManifestSchema1))
	if err != nil {
		t.Fatal(err)
	}
	if d != want {
		t.Errorf("%s:%s is %s, the release printed %s", repo, tag, d, want)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != ManifestsArtifactType || m.Config.MediaType != ocispec.MediaTypeEmptyJSON || len(m.Layers) != 2 {
		t.Fatalf("the manifests' artifact is %s", body)
	}
	files := map[string][]byte{}
	var names []string
	for _, l := range m.Layers {
		name := l.Annotations[ocispec.AnnotationTitle]
		names = append(names, name)
		if l.MediaType != ManifestsMediaType {
			t.Errorf("%s has the media type %s, want %s", name, l.MediaType, ManifestsMediaType)
		}
		blob, _, err := dist.Get(t.Context(), repo, "blobs/"+l.Digest.String(), "")
		if err != nil {
			t.Fatal(err)
		}
		files[name] = blob
	}
	if !slices.Equal(names, []string{ManifestsFile, CRDsFile}) {
		t.Errorf("the artifact's files are %v, want %s and %s", names, ManifestsFile, CRDsFile)
	}
	return files
}
