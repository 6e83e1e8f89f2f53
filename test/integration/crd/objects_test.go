package crd

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/c5c3/glance-operator/test/fixtures"
)

type mutation = fixtures.Mutation

var (
	set = fixtures.Set
	del = fixtures.Del

	minimalGlance  = fixtures.MinimalGlance
	minimalBackend = fixtures.MinimalBackend
)

func glance(name string, muts ...mutation) *unstructured.Unstructured {
	return object(minimalGlance, name, muts...)
}

func backend(name string, muts ...mutation) *unstructured.Unstructured {
	return object(minimalBackend, name, muts...)
}

// object decodes a manifest into the suite's namespace, names it and
// applies the mutations.
func object(manifest, name string, mutations ...mutation) *unstructured.Unstructured {
	return fixtures.Object(manifest, namespace, name, mutations...)
}
