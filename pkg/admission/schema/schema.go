// Package schema evaluates Glance and GlanceBackend objects offline exactly as
// kube-apiserver v1.37.2 does with the operator's CRDs, before and after the
// admission webhooks run. It is the structural-schema half of
// `glance-webhook check`; pkg/admission holds the operator's own
// defaulting and validation.
//
// It runs the API server's own code on the embedded CRDs, built the way
// kube-apiserver's CRD handler builds it
// (k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go):
//
//   - Decode is the request-body decoder of a create or update
//     (schemaCoercingDecoder + unstructuredDefaulter): strict JSON decoding,
//     ObjectMeta coercion, pruning of unknown fields, dropping nulls of
//     non-nullable fields without a default, then structural defaults.
//   - Default is what the mutating-webhook dispatcher does with a patched
//     object: decode it again (no pruning) and re-apply structural defaults.
//   - Validate is the custom-resource strategy the server registers
//     (k8s.io/apiextensions-apiserver/pkg/registry/customresource.NewStrategy)
//     run through the generic registry's rest.ValidateCreate/ValidateUpdate,
//     after the same PrepareForCreate/PrepareForUpdate steps.
//
// Unknown fields. kubectl sends fieldValidation=Strict, under which the server
// refuses a body with unknown fields with 400 Bad Request, before admission
// and before any schema validation, and names every pruned field in the
// message: `Glance in version "v1alpha1" cannot be handled as a Glance:
// strict decoding error: unknown field "spec.foo", unknown field
// "spec.bar"`. Decode returns exactly that error as a *DecodeError (an
// apierrors.APIStatus) whose UnknownFields lists the paths; it still returns
// the pruned and defaulted object, which is what the server goes on with under
// fieldValidation=Warn or Ignore. Unknown fields are therefore never
// field.Errors and never appear among Validate's causes.
//
// Feature gates are read from k8s.io/apiserver's DefaultFeatureGate, whose
// defaults at these library versions are kube-apiserver v1.37.2's defaults
// (CRDValidationRatcheting is GA and locked on).
package schema

import (
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/charts/glance-operator/files/crds"
)

// Set holds the evaluators of the operator's kinds.
type Set struct {
	kinds map[schema.GroupVersionKind]*Kind
}

// Kind evaluates objects of one served version of a CRD. It is safe for
// concurrent use.
type Kind struct {
	gvk      schema.GroupVersionKind
	strategy crStrategy
	// structurals are the structural schemas of every version of the CRD,
	// as the server's decoder looks them up by the version of the body.
	structurals map[string]*structuralschema.Structural
	// strictDecoder and decoder are the server's JSON serializers for
	// fieldValidation=Strict request bodies and for webhook patches.
	strictDecoder runtime.Decoder
	decoder       runtime.Decoder
	typer         runtime.ObjectTyper
}

// crStrategy is the part of the API server's custom-resource strategy that
// create and update validation use; customresource.NewStrategy returns an
// unexported type that implements it.
type crStrategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// Load parses and compiles the embedded CRDs (schemas and CEL programs). The
// work is done once per process; every call returns the same Set.
func Load() (*Set, error) { return loadOnce() }

var loadOnce = sync.OnceValues(func() (*Set, error) {
	set := &Set{kinds: map[schema.GroupVersionKind]*Kind{}}
	for _, data := range [][]byte{crds.Glance, crds.GlanceBackend} {
		kinds, err := kindsOf(data)
		if err != nil {
			return nil, err
		}
		for _, k := range kinds {
			set.kinds[k.gvk] = k
		}
	}
	return set, nil
})

// For returns the evaluator of gvk, if the operator serves it.
func (s *Set) For(gvk schema.GroupVersionKind) (*Kind, bool) {
	k, ok := s.kinds[gvk]
	return k, ok
}

// GroupVersionKind returns the kind k evaluates.
func (k *Kind) GroupVersionKind() schema.GroupVersionKind { return k.gvk }

// kindsOf builds the evaluators of every served version of a CRD, mirroring
// crdHandler.getOrCreateServingInfoFor.
func kindsOf(data []byte) ([]*Kind, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("parse CRD: %w", err)
	}
	// The server defaults the CRD when it is created (names, conversion).
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)

	structurals := map[string]*structuralschema.Structural{}
	for _, v := range crd.Spec.Versions {
		s, err := structuralFor(crd, v.Name)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", crd.Name, v.Name, err)
		}
		structurals[v.Name] = s
	}

	typer := crdserverscheme.NewUnstructuredObjectTyper()
	creator := unstructuredscheme.NewUnstructuredCreator()
	var kinds []*Kind
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		openAPI, err := internalSchemaFor(crd, v.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(openAPI)
		if err != nil {
			return nil, fmt.Errorf("%s: schema validator: %w", gvk, err)
		}
		status, statusValidator, scale, err := subresourcesFor(crd, v.Name, openAPI)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		strategy := customresource.NewStrategy(typer, crd.Spec.Scope == apiextensionsv1.NamespaceScoped, gvk,
			validator, statusValidator, structurals[v.Name], status, scale, v.SelectableFields)
		kinds = append(kinds, &Kind{
			gvk:           gvk,
			strategy:      strategy,
			structurals:   structurals,
			strictDecoder: json.NewSerializerWithOptions(json.DefaultMetaFactory, creator, typer, json.SerializerOptions{Strict: true}),
			decoder:       json.NewSerializerWithOptions(json.DefaultMetaFactory, creator, typer, json.SerializerOptions{}),
			typer:         typer,
		})
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("CRD %s serves no version", crd.Name)
	}
	return kinds, nil
}

// internalSchemaFor converts the version's OpenAPI schema to the internal
// type the server's validators take. Each call returns a fresh copy, as the
// server converts separately for the structural schema and the validator.
func internalSchemaFor(crd *apiextensionsv1.CustomResourceDefinition, version string) (*apiextensions.JSONSchemaProps, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	if val == nil || val.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("version %s has no schema", version)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema: %w", err)
	}
	return internal.OpenAPIV3Schema, nil
}

// structuralFor returns the structural schema with the defaults pruned, as the
// server uses it for pruning, defaulting, list types and CEL.
func structuralFor(crd *apiextensionsv1.CustomResourceDefinition, version string) (*structuralschema.Structural, error) {
	openAPI, err := internalSchemaFor(crd, version)
	if err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(openAPI)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("prune defaults: %w", err)
	}
	return s, nil
}

// subresourcesFor returns the status and scale subresources of a version and
// the status validator, as the server passes them to NewStrategy.
func subresourcesFor(crd *apiextensionsv1.CustomResourceDefinition, version string, openAPI *apiextensions.JSONSchemaProps) (
	*apiextensions.CustomResourceSubresourceStatus, apiservervalidation.SchemaValidator, *apiextensions.CustomResourceSubresourceScale, error) {
	sub, err := apihelpers.GetSubresourcesForVersion(crd, version)
	if err != nil || sub == nil {
		return nil, nil, nil, err
	}
	var status *apiextensions.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	if sub.Status != nil {
		status = &apiextensions.CustomResourceSubresourceStatus{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(sub.Status, status, nil); err != nil {
			return nil, nil, nil, err
		}
		if statusSchema, ok := openAPI.Properties["status"]; ok {
			if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&statusSchema); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	var scale *apiextensions.CustomResourceSubresourceScale
	if sub.Scale != nil {
		scale = &apiextensions.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(sub.Scale, scale, nil); err != nil {
			return nil, nil, nil, err
		}
	}
	return status, statusValidator, scale, nil
}
