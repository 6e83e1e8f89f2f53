package schema

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DecodeError is the 400 Bad Request kube-apiserver answers a create or
// update body with when it cannot decode it. It implements
// apierrors.APIStatus, so apierrors.IsBadRequest recognises it.
type DecodeError struct {
	// UnknownFields are the fields the server reports under
	// fieldValidation=Strict, as it names them ("spec.foo", "metadata.bar",
	// "spec.middleware[0].x"): unknown metadata fields first, then the fields
	// pruned by the schema, sorted. Empty when the body failed for another
	// reason (malformed metadata, missing kind, wrong apiVersion).
	UnknownFields []string
	// ErrStatus is the status the server returns.
	ErrStatus metav1.Status
}

func (e *DecodeError) Error() string { return e.ErrStatus.Message }

// Status returns the status the server returns.
func (e *DecodeError) Status() metav1.Status { return e.ErrStatus }

// Decode returns obj as kube-apiserver holds it after decoding it as the JSON
// body of a create or update with fieldValidation=Strict, before admission:
// numbers become int64 or float64, ObjectMeta is coerced, unknown fields are
// pruned, nulls of non-nullable fields without a default are dropped, and the
// structural defaults are applied. obj is not modified.
//
// When the server refuses the body, err is a *DecodeError with the server's
// status. If the refusal is only for unknown fields, decoded is still returned
// (pruned and defaulted), as the server continues with it under
// fieldValidation=Warn; otherwise decoded is nil. An error of any other type
// means obj does not encode as JSON.
func (k *Kind) Decode(obj map[string]any) (decoded map[string]any, err error) {
	// Clients send unstructured objects encoded with encoding/json.
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", k.gvk.Kind, err)
	}
	// The handler decodes into a new object preset with the served kind
	// (customresource NewFunc), through the strict serializer, the schema
	// coercing decoder and the versioning codec's defaulter.
	into := &unstructured.Unstructured{}
	into.SetGroupVersionKind(k.gvk)
	out, gvk, err := k.strictDecoder.Decode(body, &k.gvk, into)
	var strictErrs []error
	if err != nil {
		strict, ok := runtime.AsStrictDecodingError(err)
		if !ok || out == nil {
			return nil, k.decodeError(err, into, gvk, body, nil)
		}
		strictErrs = strict.Errors()
	}
	u := out.(*unstructured.Unstructured)
	unknown, err := k.coerce(u)
	if err != nil {
		return nil, k.decodeError(err, into, gvk, body, nil)
	}
	for _, f := range unknown {
		strictErrs = append(strictErrs, fmt.Errorf(`unknown field "%s"`, f))
	}
	k.defaultObject(u)
	if len(strictErrs) > 0 {
		return u.Object, k.decodeError(runtime.NewStrictDecodingError(strictErrs), into, gvk, body, unknown)
	}
	if gv := gvk.GroupVersion(); gv != k.gvk.GroupVersion() {
		return nil, &DecodeError{ErrStatus: apierrors.NewBadRequest(fmt.Sprintf(
			"the API version in the data (%s) does not match the expected API version (%v)", gv, k.gvk.GroupVersion())).ErrStatus}
	}
	return u.Object, nil
}

// Default returns obj as kube-apiserver holds it after a mutating webhook
// patched it to obj: decoded again from JSON (without pruning) and with the
// structural defaults re-applied. obj is not modified; an error means obj
// does not encode as JSON or is not an object of a kind.
func (k *Kind) Default(obj map[string]any) (map[string]any, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", k.gvk.Kind, err)
	}
	out, _, err := k.decoder.Decode(body, nil, &unstructured.Unstructured{})
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", k.gvk.Kind, err)
	}
	u := out.(*unstructured.Unstructured)
	k.defaultObject(u)
	return u.Object, nil
}

// defaultObject is the server's unstructuredDefaulter: structural defaults of
// the object's version, for objects of this group and kind.
func (k *Kind) defaultObject(u *unstructured.Unstructured) {
	gvk := u.GroupVersionKind()
	if gvk.GroupKind() != k.gvk.GroupKind() {
		return
	}
	structuraldefaulting.Default(u.Object, k.structurals[gvk.Version])
}

// coerce is the server's unstructuredSchemaCoercer.apply for request bodies
// (returnUnknownFieldPaths set, as for the strict serializer): it returns the
// unknown field paths it dropped.
func (k *Kind) coerce(u *unstructured.Unstructured) ([]string, error) {
	kind, foundKind, err := unstructured.NestedString(u.Object, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundObjectMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		ReturnUnknownFieldPaths: true,
	})
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	if gv.Group == k.gvk.Group && kind == k.gvk.Kind {
		s := k.structurals[gv.Version]
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, s, true,
			structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s)
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, s, false, schemaobjectmeta.CoerceOptions{
			ReturnUnknownFieldPaths: true,
		})
		if ferr != nil {
			return nil, ferr
		}
		unknown = append(unknown, paths...)
	}
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// decodeError is the handlers' transformDecodeError: the Bad Request for a
// body that failed to decode into `into` as gvk.
func (k *Kind) decodeError(baseErr error, into runtime.Object, gvk *schema.GroupVersionKind, body []byte, unknown []string) *DecodeError {
	e := &DecodeError{UnknownFields: unknown}
	objGVKs, _, err := k.typer.ObjectKinds(into)
	switch {
	case err != nil:
		e.ErrStatus = apierrors.NewBadRequest(err.Error()).ErrStatus
	case gvk != nil && len(gvk.Kind) > 0:
		e.ErrStatus = apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, objGVKs[0].Kind, baseErr)).ErrStatus
	default:
		e.ErrStatus = apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", objGVKs[0].Kind, baseErr, summarizeData(body, 30))).ErrStatus
	}
	return e
}

// summarizeData is the handlers' summary of a body in decode errors.
func summarizeData(data []byte, maxLength int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLength {
			return string(data[:maxLength]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLength {
			return hex.EncodeToString(data[:maxLength]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}
