package schema

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/c5c3/glance-operator/test/fixtures"
)

type mutation = fixtures.Mutation

var (
	set = fixtures.Set
	del = fixtures.Del

	fullGlance     = fixtures.FullGlance
	minimalBackend = fixtures.MinimalBackend
	fullBackend    = fixtures.FullBackend
)

// object decodes a manifest, names it (an empty name leaves it unnamed) and
// applies the mutations. The test sets the namespace.
func object(manifest, name string, mutations ...mutation) *unstructured.Unstructured {
	return fixtures.Object(manifest, "", name, mutations...)
}

func glance(name string, muts ...mutation) *unstructured.Unstructured {
	return object(fixtures.MinimalGlance, name, muts...)
}

func backend(name string, muts ...mutation) *unstructured.Unstructured {
	return object(fixtures.MinimalBackend, name, muts...)
}

// deepCopy copies decoded JSON.
func deepCopy(m map[string]any) map[string]any { return runtime.DeepCopyJSON(m) }
