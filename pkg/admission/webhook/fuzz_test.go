package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// fuzzPaths are the webhooks FuzzAdmissionReview picks from by index.
var fuzzPaths = []string{MutateGlancePath, ValidateGlancePath, MutateGlanceBackendPath, ValidateGlanceBackendPath}

// fuzzOperations are how the fuzzed bytes reach a webhook: as the object of
// a CREATE, as the object of an UPDATE from the valid seed, as both objects
// of an UPDATE, or as the whole request body.
const (
	fuzzCreate = iota
	fuzzUpdateFromSeed
	fuzzUpdateFromItself
	fuzzRawBody
	fuzzOperations
)

// FuzzAdmissionReview sends AdmissionReviews of both kinds to the four
// handlers as the server serves them (the same limits, metrics and log) and
// holds each answer to what the API server relies on:
//   - no panic: a recovered one would be a 500 verdict, so recovery is off;
//   - HTTP 200 with an AdmissionReview of the request's UID, or a 4xx;
//   - a verdict code that is never a 5xx: the lookups here cannot fail;
//   - a mutating answer's patch applies to the object it came with, and the
//     patched object, defaulted again, needs no further patch.
//
// The seeds are valid Glances and GlanceBackends and hostile variants; the
// fuzzer mutates their bytes, so most inputs stay close to a real object.
func FuzzAdmissionReview(f *testing.F) {
	for _, obj := range fuzzSeedObjects(f) {
		for path := range fuzzPaths {
			for op := range fuzzOperations {
				f.Add(uint8(path), uint8(op), obj)
			}
		}
	}
	for _, raw := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"apiVersion":"v1"}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":null}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"DELETE","oldObject":{}}}`,
		`{"apiVersion":"admission.k8s.io/v9","kind":"AdmissionReview","request":{"uid":"u"}}`,
	} {
		for path := range fuzzPaths {
			f.Add(uint8(path), uint8(fuzzRawBody), []byte(raw))
		}
	}

	scheme := k8sruntime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	s := &server{log: logr.Discard(), metrics: processMetrics(), drain: context.Background(), shutdown: context.Background(), budget: &inFlightBudget{max: DefaultServerOptions().MaxInFlightBytes}}
	hooks := Handlers(scheme, benchLookups())
	handlers := map[string]http.Handler{}
	for path, hook := range hooks {
		handlers[path] = s.instrument(path, hook.WithRecoverPanic(false))
	}
	seeds := map[string][]byte{}
	for _, path := range fuzzPaths {
		seeds[path] = fuzzSeedOf(f, path)
	}

	f.Fuzz(func(t *testing.T, pathIndex, op uint8, object []byte) {
		path := fuzzPaths[int(pathIndex)%len(fuzzPaths)]
		body := fuzzBody(path, op%fuzzOperations, object, seeds[path])
		status, review := serveFuzzReview(t, handlers[path], path, body)
		if status != http.StatusOK {
			return
		}
		resp := review.Response
		if resp.Result != nil && resp.Result.Code >= 500 {
			t.Fatalf("verdict code %d (%s) for a review the lookups could judge; body %q", resp.Result.Code, resp.Result.Message, body)
		}
		if op%fuzzOperations == fuzzRawBody || !resp.Allowed || len(resp.Patch) == 0 {
			return
		}
		patched := applyPatch(t, object, resp)
		again := fuzzBody(path, fuzzCreate, patched, nil)
		status, review = serveFuzzReview(t, handlers[path], path, again)
		if status != http.StatusOK || !review.Response.Allowed {
			t.Fatalf("the defaulted object is refused (%d, %+v): %s", status, review.Response.Result, again)
		}
		if p := review.Response.Patch; len(p) > 0 && string(p) != "[]" {
			t.Fatalf("defaulting is not idempotent: the defaulted object\n%s\ngets the patch %s", patched, p)
		}
	})
}

// fuzzBody is the request body of one fuzz case. The object bytes are
// spliced in as they are: bytes that are not JSON make a body that is not.
func fuzzBody(path string, op uint8, object, seed []byte) []byte {
	if op == fuzzRawBody {
		return object
	}
	kind, resource := "Glance", "glances"
	if path == MutateGlanceBackendPath || path == ValidateGlanceBackendPath {
		kind, resource = "GlanceBackend", "glancebackends"
	}
	operation, old := admissionv1.Create, []byte("null")
	switch op {
	case fuzzUpdateFromSeed:
		operation, old = admissionv1.Update, seed
	case fuzzUpdateFromItself:
		operation, old = admissionv1.Update, object
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"fuzz-uid",`+
		`"kind":{"group":"glance.openstack.c5c3.io","version":"v1alpha1","kind":%q},`+
		`"resource":{"group":"glance.openstack.c5c3.io","version":"v1alpha1","resource":%q},`+
		`"name":"glance","namespace":%q,"operation":%q,"userInfo":{"username":"fuzz"},"object":`,
		kind, resource, benchNamespace, operation)
	b.Write(object)
	b.WriteString(`,"oldObject":`)
	b.Write(old)
	b.WriteString(`}}`)
	return b.Bytes()
}

// serveFuzzReview posts body to h and checks the HTTP contract: 200 with
// an AdmissionReview answering the request's UID, or a 4xx.
func serveFuzzReview(t *testing.T, h http.Handler, path string, body []byte) (int, admissionv1.AdmissionReview) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)).WithContext(t.Context())
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var review admissionv1.AdmissionReview
	switch {
	case w.Code == http.StatusOK:
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("a 200 answer that is no AdmissionReview response (%v): %s", err, w.Body.String())
		}
		var sent struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.Unmarshal(body, &sent); err == nil && string(review.Response.UID) != sent.Request.UID {
			t.Fatalf("response UID %q for request UID %q", review.Response.UID, sent.Request.UID)
		}
	case w.Code < 400 || w.Code >= 500:
		t.Fatalf("HTTP %d, want 200 or 4xx: %s", w.Code, w.Body.String())
	}
	return w.Code, review
}

// applyPatch applies a mutating answer's JSON patch to the object it came
// with, as the API server does.
func applyPatch(t *testing.T, object []byte, resp *admissionv1.AdmissionResponse) []byte {
	t.Helper()
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("the patch %s does not decode: %v", resp.Patch, err)
	}
	patched, err := patch.Apply(object)
	if err != nil {
		t.Fatalf("the patch %s does not apply to the object it came with\n%s\n%v", resp.Patch, object, err)
	}
	return patched
}

// fuzzSeedOf is the valid object of a path's kind an UPDATE seed starts from.
func fuzzSeedOf(tb testing.TB, path string) []byte {
	if path == MutateGlanceBackendPath || path == ValidateGlanceBackendPath {
		return []byte(mustJSON(tb, sampleBackend(benchNamespace, "primary", false)))
	}
	return []byte(mustJSON(tb, benchGlance()))
}

// fuzzSeedObjects are valid objects of both kinds, minimal and full, and
// variants the rules must refuse.
func fuzzSeedObjects(tb testing.TB) [][]byte {
	minimal := &v1alpha1.Glance{
		TypeMeta: sampleGlance(benchNamespace).TypeMeta,
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: "2026.1",
			Image:            v1alpha1.ImageSpec{Repository: "glance", Tag: "2026.1"},
			Database:         v1alpha1.DatabaseSpec{ClusterRef: &v1alpha1.LocalObjectReference{Name: "m"}, SecretRef: v1alpha1.SecretKeySelector{Name: "db"}},
			KeystoneEndpoint: "http://keystone:5000/v3",
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: "su"}},
		},
	}
	minimal.Name, minimal.Namespace = "glance", benchNamespace

	hostile := benchGlance()
	hostile.Spec.ExtraConfig = map[string]map[string]string{
		"DEFAULT\n[evil]": {"k": "v"},
		"DEFAULT":         {"debug": "true\n[keystone_authtoken]\npassword = x", "bidi\u202e": "1"},
	}
	hostile.Spec.OpenStackRelease = "2099.9"
	hostile.Spec.Deployment.Replicas = ptr.To[int32](-1)

	backends := []*v1alpha1.GlanceBackend{
		sampleBackend(benchNamespace, "primary", true),
		sampleBackend(benchNamespace, "second", true), // a second default
		{TypeMeta: sampleBackend("", "", false).TypeMeta, Spec: v1alpha1.GlanceBackendSpec{GlanceRef: v1alpha1.LocalObjectReference{Name: "glance"}, Type: v1alpha1.BackendTypeS3}},
	}
	backends[2].Name, backends[2].Namespace = "empty", benchNamespace
	hostileBackend := sampleBackend(benchNamespace, "hostile", false)
	hostileBackend.Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"weight\n[x]": "1", "rbd_store_pool": "a\nb"}
	backends = append(backends, hostileBackend)

	out := [][]byte{[]byte(mustJSON(tb, minimal)), []byte(mustJSON(tb, benchGlance())), []byte(mustJSON(tb, hostile))}
	for _, b := range backends {
		out = append(out, []byte(mustJSON(tb, b)))
	}
	// Quantities and integers at and past their bounds.
	for _, q := range []string{`"1e999999"`, `"-1"`, `"9223372036854775807Ei"`, `1e400`, `"0.000000001m"`} {
		out = append(out, bytes.Replace([]byte(mustJSON(tb, benchGlance())), []byte(`"20Gi"`), []byte(q), 1))
	}
	return slices.Clip(out)
}

// TestFuzzSeedsAreJudged checks that the fuzz target's valid seeds reach the
// rules: were they refused at decoding, the fuzzer would explore only the
// decoder.
func TestFuzzSeedsAreJudged(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hooks := Handlers(scheme, benchLookups())
	for _, path := range fuzzPaths {
		t.Run(strconv.Quote(path), func(t *testing.T) {
			body := fuzzBody(path, fuzzCreate, fuzzSeedOf(t, path), nil)
			status, review := serveFuzzReview(t, reviewHandler{hook: hooks[path]}, path, body)
			if status != http.StatusOK || !review.Response.Allowed {
				t.Fatalf("the seed is not allowed: %d %+v", status, review.Response.Result)
			}
		})
	}
}
