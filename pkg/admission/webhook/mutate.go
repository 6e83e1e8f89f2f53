package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// specDefaulter answers a mutating review with a JSON patch of the spec
// alone. Every default lives in the spec, so the metadata, where the
// largest values of an object are, is decoded once and never copied,
// marshalled or diffed: in place of controller-runtime's defaulter, which
// deep-copies the object and diffs all of it, twice when the round trip
// drops a field.
type specDefaulter[T runtime.Object, S any] struct {
	decoder   cradmission.Decoder
	newObject func() T
	spec      func(T) *S
	// deepCopy is the spec's DeepCopy; it shares the spec's strings.
	deepCopy func(*S) *S
	defaults func(*S)
}

func newSpecDefaulter[T runtime.Object, S any](scheme *runtime.Scheme, newObject func() T, spec func(T) *S, deepCopy func(*S) *S, defaults func(*S)) *cradmission.Webhook {
	return &cradmission.Webhook{Handler: specDefaulter[T, S]{
		decoder: cradmission.NewDecoder(scheme), newObject: newObject, spec: spec, deepCopy: deepCopy, defaults: defaults,
	}}
}

func (h specDefaulter[T, S]) Handle(_ context.Context, req cradmission.Request) cradmission.Response {
	if req.Operation == admissionv1.Delete {
		return cradmission.Allowed("")
	}
	obj := h.newObject()
	if err := h.decoder.Decode(req, obj); err != nil {
		return cradmission.Errored(http.StatusBadRequest, err)
	}
	spec := h.spec(obj)
	before := h.deepCopy(spec)
	h.defaults(spec)
	if reflect.DeepEqual(before, spec) {
		return cradmission.Allowed("")
	}
	patch, err := specPatch(req.Object.Raw, spec)
	if err != nil {
		return cradmission.Errored(http.StatusBadRequest, err)
	}
	return cradmission.Response{Patches: patch, AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true}}
}

// specPatch is the JSON patch that turns the spec of raw into spec. Its
// remove operations are dropped: defaulting only sets fields, so a remove
// would be a field of raw the Go type does not keep, which is not the
// webhook's to delete.
func specPatch(raw []byte, spec any) ([]jsonpatch.Operation, error) {
	// Case-sensitive, as the object itself was decoded.
	var object struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := utiljson.Unmarshal(raw, &object); err != nil {
		return nil, fmt.Errorf("decode the object's spec: %w", err)
	}
	if len(object.Spec) == 0 || string(object.Spec) == "null" {
		return []jsonpatch.Operation{{Operation: "add", Path: "/spec", Value: spec}}, nil
	}
	defaulted, err := utiljson.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode the defaulted spec: %w", err)
	}
	ops, err := jsonpatch.CreatePatch(object.Spec, defaulted)
	if err != nil {
		// A value the API server would not have decoded, such as a number
		// out of float64's range.
		return nil, fmt.Errorf("compare the spec with its defaults: %w", err)
	}
	kept := ops[:0]
	for _, op := range ops {
		if op.Operation == "remove" {
			continue
		}
		op.Path = "/spec" + op.Path
		kept = append(kept, op)
	}
	return kept, nil
}
