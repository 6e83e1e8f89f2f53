package schema

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	kjson "sigs.k8s.io/json"
)

// Validate returns the field errors kube-apiserver's registry returns for a
// create (old nil) or an update of obj, after the mutating webhooks and before
// the validating ones: ObjectMeta validation of a namespaced custom resource,
// OpenAPI schema validation (on update with the ratcheting of unchanged
// fields), x-kubernetes-list-type set/map validation, and the CEL
// x-kubernetes-validations with their transition rules against old and the
// server's cost budget. When schema errors kept CEL from running, the list
// ends with the server's "some validation rules were not checked because the
// object was invalid; ..." error.
//
// obj and old should be what the server holds: obj from Decode or Default,
// old the stored object (Decode of it). Like the server, obj needs
// metadata.namespace (the server takes it from the request URL). Before
// validating, Validate applies the server's preparation to copies: on create
// it clears the system metadata (uid, timestamps), drops status and generates
// the name from generateName; on update it keeps old's status, generation,
// uid and timestamps, and takes old's metadata.resourceVersion when obj has
// none (an update of the current version; a placeholder when old has none
// either). Neither argument is modified.
//
// A non-empty result is rejected with the error Invalid returns.
func (k *Kind) Validate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	u, err := serverCopy(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if old == nil {
		// The create handler, genericregistry.Store.Create, then
		// rest.BeforeCreate.
		rest.WipeObjectMetaSystemFields(u)
		if u.GetName() == "" && u.GetGenerateName() != "" {
			u.SetName(k.strategy.GenerateName(u.GetGenerateName()))
		}
		k.strategy.PrepareForCreate(ctx, u)
		return rest.ValidateCreate(ctx, u, k.strategy)
	}
	uOld, err := serverCopy(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	// An update replaces the version it names (else the store answers
	// Conflict), and a stored object always has one; a manifest given as old
	// has none.
	if uOld.GetResourceVersion() == "" {
		uOld.SetResourceVersion("1")
	}
	if u.GetResourceVersion() == "" {
		u.SetResourceVersion(uOld.GetResourceVersion())
	}
	// rest.BeforeUpdate.
	u.SetGeneration(uOld.GetGeneration())
	k.strategy.PrepareForUpdate(ctx, u, uOld)
	if u.GetUID() == "" {
		u.SetUID(uOld.GetUID())
	}
	if created := uOld.GetCreationTimestamp(); !created.IsZero() {
		u.SetCreationTimestamp(created)
	}
	if !uOld.GetDeletionTimestamp().IsZero() {
		u.SetDeletionTimestamp(uOld.GetDeletionTimestamp())
	}
	if uOld.GetDeletionGracePeriodSeconds() != nil && u.GetDeletionGracePeriodSeconds() == nil {
		u.SetDeletionGracePeriodSeconds(uOld.GetDeletionGracePeriodSeconds())
	}
	return rest.ValidateUpdate(ctx, u, uOld, k.strategy)
}

// Invalid returns the error kube-apiserver answers with when Validate
// returned errs for the object named name: 422 Unprocessable Entity with one
// cause per error.
func (k *Kind) Invalid(name string, errs field.ErrorList) *apierrors.StatusError {
	return apierrors.NewInvalid(k.gvk.GroupKind(), name, errs)
}

// serverCopy returns a deep copy of obj with the JSON types the server's
// decoder produces (int64 or float64 numbers), which the schema and CEL
// validators rely on.
func serverCopy(obj map[string]any) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
