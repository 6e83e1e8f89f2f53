package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission"
)

func TestSpecDefaulterPatchesTheSpecAlone(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hook := reviewHandler{hook: Handlers(scheme, benchLookups())[MutateGlancePath]}
	defaulted := benchGlance()
	admission.DefaultGlanceSpec(&defaulted.Spec)
	withoutSpec := `{"apiVersion":"glance.openstack.c5c3.io/v1alpha1","kind":"Glance","metadata":{"name":"glance","namespace":"openstack"}}`

	for name, c := range map[string]struct {
		object string
		// wantCode is the verdict's code; 200 with wantPaths, each a path
		// prefix some operation has, and no operation outside /spec.
		wantCode  int32
		wantPaths []string
		wantNoOps bool
	}{
		"defaults fill the spec": {
			object: mustJSON(t, benchGlance()), wantCode: http.StatusOK,
			wantPaths: []string{"/spec/logging", "/spec/serviceUser/username", "/spec/database/port"},
		},
		"an object without a spec gets all of it": {
			object: withoutSpec, wantCode: http.StatusOK, wantPaths: []string{"/spec"},
		},
		"a defaulted object gets no patch": {
			object: mustJSON(t, defaulted), wantCode: http.StatusOK, wantNoOps: true,
		},
		// The Go type drops a field the schema would have pruned; the
		// patch must not delete it behind the API server's back.
		"a field the type does not keep is not removed": {
			object:   strings.Replace(mustJSON(t, benchGlance()), `"spec":{`, `"spec":{"unknownField":1,`, 1),
			wantCode: http.StatusOK, wantPaths: []string{"/spec/logging"},
		},
		"a number no decoder takes is a bad request, not a server error": {
			object:   strings.Replace(mustJSON(t, benchGlance()), `"20Gi"`, `1e400`, 1),
			wantCode: http.StatusBadRequest,
		},
	} {
		t.Run(name, func(t *testing.T) {
			body := fuzzBody(MutateGlancePath, fuzzCreate, []byte(c.object), nil)
			status, review := serveFuzzReview(t, hook, MutateGlancePath, body)
			if status != http.StatusOK {
				t.Fatalf("HTTP %d", status)
			}
			resp := review.Response
			if resp.Result == nil || resp.Result.Code != c.wantCode {
				t.Fatalf("verdict %+v, want code %d", resp.Result, c.wantCode)
			}
			if c.wantCode != http.StatusOK {
				return
			}
			var ops []struct{ Op, Path string }
			if len(resp.Patch) > 0 {
				if err := json.Unmarshal(resp.Patch, &ops); err != nil {
					t.Fatal(err)
				}
			}
			if c.wantNoOps != (len(ops) == 0) {
				t.Fatalf("patch %s", resp.Patch)
			}
			for _, op := range ops {
				if op.Op == "remove" || (op.Path != "/spec" && !strings.HasPrefix(op.Path, "/spec/")) {
					t.Errorf("operation %s %s outside the spec's defaults", op.Op, op.Path)
				}
			}
			for _, want := range c.wantPaths {
				found := false
				for _, op := range ops {
					found = found || strings.HasPrefix(op.Path, want)
				}
				if !found {
					t.Errorf("no operation on %s in %s", want, resp.Patch)
				}
			}
			if len(ops) > 0 {
				applyPatch(t, []byte(c.object), &admissionv1.AdmissionResponse{Patch: resp.Patch, PatchType: resp.PatchType})
			}
		})
	}
}
