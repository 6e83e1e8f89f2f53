package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions returns the conditions of the Glance.
func (g *Glance) GetConditions() []metav1.Condition { return g.Status.Conditions }

// SetConditions replaces the conditions of the Glance.
func (g *Glance) SetConditions(c []metav1.Condition) { g.Status.Conditions = c }

// SetObservedGeneration records the spec generation the status describes.
func (g *Glance) SetObservedGeneration(gen int64) { g.Status.ObservedGeneration = gen }

// GetConditions returns the conditions of the GlanceBackend.
func (b *GlanceBackend) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the conditions of the GlanceBackend.
func (b *GlanceBackend) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// SetObservedGeneration records the spec generation the status describes.
func (b *GlanceBackend) SetObservedGeneration(gen int64) { b.Status.ObservedGeneration = gen }
