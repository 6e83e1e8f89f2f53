// Package v1alpha1 holds the glance.openstack.c5c3.io/v1alpha1 API: the Glance
// image service and the GlanceBackend image stores attached to it.
//
// +kubebuilder:object:generate=true
// +groupName=glance.openstack.c5c3.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "glance.openstack.c5c3.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this API with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this API to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
