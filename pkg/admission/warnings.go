package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
)

// ImageCacheFloor is the smallest imageCache.size that leaves the pruner a
// threshold (80% of it) able to hold a typical image.
var ImageCacheFloor = resource.MustParse("1Gi")

// knobWarnings flags the launch-mode knobs the release ignores.
func knobWarnings(g *v1alpha1.Glance) Warnings {
	api := g.Spec.APIServer
	if api == nil {
		return nil
	}
	rel := g.Spec.OpenStackRelease
	var w Warnings
	switch release.LaunchModeOf(rel) {
	case release.Eventlet:
		if api.UWSGI != nil {
			w = append(w, fmt.Sprintf("spec.apiServer.uwsgi has no effect on %s: releases before %s run the eventlet glance-api server; use spec.apiServer.workers", rel, release.UWSGIFrom))
		}
	case release.UWSGI:
		if api.Workers != nil {
			w = append(w, fmt.Sprintf("spec.apiServer.workers has no effect on %s: releases from %s run under uWSGI; use spec.apiServer.uwsgi.processes", rel, release.UWSGIFrom))
		}
		if u := api.UWSGI; u != nil && u.Harakiri != nil {
			w = append(w, fmt.Sprintf("spec.apiServer.uwsgi.harakiri kills every request that runs longer than %ds, image uploads and downloads included", *u.Harakiri))
		}
	}
	return w
}

// storageWarnings flags scratch and cache volumes that can fill a node or
// outgrow the container's ephemeral-storage limit, and a cache too small to
// be useful.
func storageWarnings(g *v1alpha1.Glance) Warnings {
	var w Warnings
	st := g.Spec.Staging
	unbounded := st != nil && st.Unbounded
	if unbounded {
		w = append(w, "spec.staging.unbounded: the staging and tasks-work volumes have no size limit; a large import can fill the node's disk, and the kubelet then evicts pods outside the PodDisruptionBudget")
	}
	cache := g.Spec.ImageCache
	if cache != nil && quantityOutOfRange(cache.Size) {
		return w // refused; its arithmetic would not end
	}
	if cache != nil && cache.Size.Sign() > 0 && cache.Size.Cmp(ImageCacheFloor) < 0 {
		threshold := resource.NewQuantity(cache.Size.Value()*v1alpha1.ImageCacheMaxSizePercent/100, resource.BinarySI)
		w = append(w, fmt.Sprintf("spec.imageCache.size %s leaves the pruner a threshold of %s (%d%%): below %s most images cannot be cached and the pruner runs constantly",
			cache.Size.String(), threshold.String(), v1alpha1.ImageCacheMaxSizePercent, ImageCacheFloor.String()))
	}
	if unbounded || g.Spec.Deployment == nil {
		return w
	}
	limit, ok := g.Spec.Deployment.Resources.Limits[corev1.ResourceEphemeralStorage]
	if !ok {
		return w
	}
	scratch := StagingSizeLimit(g)
	if quantityOutOfRange(limit) || quantityOutOfRange(scratch) {
		return w // refused; its arithmetic would not end
	}
	total := scratch.DeepCopy()
	total.Add(scratch) // staging and tasks-work each get the bound
	cacheSize := resource.MustParse("0")
	if cache != nil {
		cacheSize = cache.Size
		total.Add(cacheSize)
	}
	if total.Cmp(limit) > 0 {
		w = append(w, fmt.Sprintf("spec.deployment.resources.limits[ephemeral-storage] %s is below the %s the volumes may fill (staging %s + tasks-work %s + image cache %s): the kubelet evicts a pod whose volumes outgrow its limit",
			limit.String(), total.String(), scratch.String(), scratch.String(), cacheSize.String()))
	}
	return w
}

// StagingSizeLimit is the resolved sizeLimit of the staging and tasks-work
// volumes; callers check Unbounded first.
func StagingSizeLimit(g *v1alpha1.Glance) resource.Quantity {
	if st := g.Spec.Staging; st != nil && st.SizeLimit != nil {
		return *st.SizeLimit
	}
	return resource.MustParse(v1alpha1.DefaultStagingSizeLimit)
}
