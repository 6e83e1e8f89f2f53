// Package render builds the objects and files a Glance runs on from its spec
// and resolved facts. Builders are pure: no client calls.
package render

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Label keys the operator sets on everything it creates.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "glance-operator"
	// ComponentAPI is the component of the glance-api pods.
	ComponentAPI = "api"
)

// CommonLabels are the labels of every object owned by the Glance named name.
func CommonLabels(name string) map[string]string {
	return map[string]string{
		LabelName:      "glance",
		LabelInstance:  name,
		LabelManagedBy: ManagedBy,
	}
}

// ChildLabels are the labels of the children of component owned by the
// Glance named name. The database and db-purge pods carry their own
// component, never api, so the Service, PDB and spread constraints never
// select them.
func ChildLabels(name, component string) map[string]string {
	l := CommonLabels(name)
	l[LabelComponent] = component
	return l
}

// ChildComponent is the IndexChildComponent key of the Glance named
// name's children of component.
func ChildComponent(name, component string) string { return name + "/" + component }

// ChildComponentOf is the IndexChildComponent key of an object with
// labels: its ChildComponent when it carries all of ChildLabels, else "".
func ChildComponentOf(labels map[string]string) string {
	name, component := labels[LabelInstance], labels[LabelComponent]
	if name == "" || component == "" {
		return ""
	}
	for k, v := range ChildLabels(name, component) {
		if labels[k] != v {
			return ""
		}
	}
	return ChildComponent(name, component)
}

// ChildComponentIndex extracts the IndexChildComponent key of a child.
func ChildComponentIndex(o client.Object) []string {
	if key := ChildComponentOf(o.GetLabels()); key != "" {
		return []string{key}
	}
	return nil
}

// EndpointSliceServiceIndex extracts the IndexEndpointSliceService key of
// an EndpointSlice: the Service it belongs to, by the label the EndpointSlice
// controller sets.
func EndpointSliceServiceIndex(o client.Object) []string {
	if service := o.GetLabels()[discoveryv1.LabelServiceName]; service != "" {
		return []string{service}
	}
	return nil
}

// APIPodLabels are the labels of the glance-api pods of the Glance named name;
// they also form the Deployment's selector.
func APIPodLabels(name string) map[string]string {
	return ChildLabels(name, ComponentAPI)
}
