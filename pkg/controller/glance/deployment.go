package glance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// DeploymentPollInterval is how often a rollout is polled.
const DeploymentPollInterval = 10 * time.Second

// reconcileDeployment ensures the API Deployment, its Service and PDB,
// stamps status.endpoint, and reports the pods the kubelet evicted for
// their image cache (see observeImageCacheEvictions). Mid-upgrade, a
// rolled-out Deployment moves the upgrade from RollingUpdate to
// Contracting.
func reconcileDeployment(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	if p.configMapName == "" || p.backends.secretName == "" {
		setDeploymentWaitingForBackends(g)
		return ctrl.Result{RequeueAfter: DatabasePollInterval}, nil
	}
	// The Service goes first: the pods advertise their own address in its
	// IP family (WorkloadFacts.PodIPFamily), which the API server assigns.
	svc := render.Service(g)
	currentSvc := &corev1.Service{}
	if err := applySpec(ctx, p, g, svc, &svc.Spec, currentSvc, &currentSvc.Spec, func() {
		// The cluster IPs are the API server's and immutable.
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = currentSvc.Spec.ClusterIP, currentSvc.Spec.ClusterIPs
		svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = currentSvc.Spec.IPFamilies, currentSvc.Spec.IPFamilyPolicy
	}); err != nil {
		return ctrl.Result{}, err
	}
	facts := p.workloadFacts()
	if families := currentSvc.Spec.IPFamilies; len(families) > 0 {
		facts.PodIPFamily = families[0]
	}
	desired, err := render.Deployment(g, facts)
	if err != nil {
		return terminalFailure(g, v1alpha1.ConditionDeploymentReady, v1alpha1.ReasonWaitingForDeployment, fmt.Sprintf("cannot render the Deployment: %v", err))
	}
	d := &appsv1.Deployment{}
	pdb := render.PodDisruptionBudget(g)
	currentPDB := &policyv1.PodDisruptionBudget{}
	if err := pipeline.Concurrently(
		func() error {
			return applySpec(ctx, p, g, desired, &desired.Spec, d, &d.Spec, func() {
				if desired.Spec.Replicas == nil {
					// Under an HPA the replica count is the autoscaler's.
					desired.Spec.Replicas = d.Spec.Replicas
				}
				// Pod template annotations others set stay: dropping
				// kubectl rollout restart's restartedAt would roll the
				// pods again on an unrelated write (a replica count).
				desired.Spec.Template.Annotations = merged(foreignAnnotations(d.Spec.Template.Annotations), desired.Spec.Template.Annotations)
			})
		},
		func() error {
			return applyChild(ctx, p, g, pdb, currentPDB, func() bool {
				// minAvailable and maxUnavailable exclude each other, so
				// compare both ways: a switch between them must be written.
				return equality.Semantic.DeepDerivative(pdb.Spec, currentPDB.Spec) &&
					(pdb.Spec.MinAvailable == nil) == (currentPDB.Spec.MinAvailable == nil)
			}, func() error { currentPDB.Spec = pdb.Spec; return nil })
		},
	); err != nil {
		return ctrl.Result{}, err
	}

	g.Status.Endpoint = render.Endpoint(g, p.r.clusterDomain())
	evicted, err := observeImageCacheEvictions(ctx, p, g)
	if err != nil {
		return ctrl.Result{}, err
	}
	if msg := rolloutPending(d); msg != "" {
		pipeline.SetCondition(g, v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDeployment,
			evictedForImageCache(msg, evicted))
		return ctrl.Result{RequeueAfter: DeploymentPollInterval}, nil
	}
	pipeline.SetCondition(g, v1alpha1.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReady,
		fmt.Sprintf("%d/%d replicas ready with the current template", d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 0)))
	if g.Status.UpgradePhase == v1alpha1.UpgradePhaseRollingUpdate {
		g.Status.UpgradePhase = v1alpha1.UpgradePhaseContracting
		announce(ctx, p, g, nil, corev1.EventTypeNormal, v1alpha1.EventDeploymentRolloutComplete, "Upgrade",
			"the Deployment runs %s on every replica; contracting the schema", g.Status.TargetRelease)
		// Come straight back so that the contract Job runs.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// rolloutPending says what the Deployment still waits for; empty when the
// controller has seen the current spec and every replica runs it and is
// available.
func rolloutPending(d *appsv1.Deployment) string {
	want := ptr.Deref(d.Spec.Replicas, 0)
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return "the Deployment controller has not seen the current spec yet"
	case st.UpdatedReplicas < want:
		return fmt.Sprintf("%d/%d replicas run the current template", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas are still terminating", st.Replicas-st.UpdatedReplicas)
	case st.ReadyReplicas < want || st.AvailableReplicas < want:
		return fmt.Sprintf("%d/%d replicas ready, %d available", st.ReadyReplicas, want, st.AvailableReplicas)
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status != corev1.ConditionTrue {
			return "the Deployment is not Available: " + c.Message
		}
	}
	return ""
}

// AnnotationRenderedHash records the digest of what the operator rendered
// for a child, to notice when the desired state changed.
const AnnotationRenderedHash = "glance.openstack.c5c3.io/rendered-hash"

// setDeploymentWaitingForBackends reports that glance-api cannot run before
// a ready default backend has produced a rendered config.
func setDeploymentWaitingForBackends(g *v1alpha1.Glance) {
	pipeline.SetCondition(g, v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends,
		"no ready default backend has produced a rendered config to run glance-api with yet")
}

// applyChild is how every mutable child is applied; immutable ConfigMaps
// and Secrets (ensureImmutable) and Jobs (ensureJob) are the only other
// ways. The rule:
//   - Drift: the existing object is written when inSync says it lacks the
//     desired state (a field-by-field comparison of what the operator
//     renders, so what the API server or another controller defaults is
//     never drift), or when the digest of the rendered object in
//     AnnotationRenderedHash changed (which catches a removal). update
//     copies the desired state into it, keeping what others own.
//   - Metadata only: a Secret is read as its metadata (existing is a
//     *metav1.PartialObjectMetadata; the caches hold no Secret's data).
//     inSync then judges by annotations (ensureSecret), update fills in
//     desired's data, only before desired is created or written in
//     existing's place, and the rendered digest leaves the data out.
//   - Metadata: the operator's labels and annotations are added to the
//     existing ones, never replacing others'.
//   - Ownership: an unowned object is adopted (controller reference on the
//     management cluster, owner labels on a target); one another
//     controller owns is refused (AlreadyOwnedError) and not written. A
//     database child (exclusiveChild) that is not the Glance's is never
//     adopted or written: foreignObjectError.
//
// A child in sync is not written at all.
func applyChild(ctx context.Context, p *pass, g *v1alpha1.Glance, desired, existing client.Object, inSync func() bool, update func() error) error {
	// The digest of what was rendered catches what a field-by-field
	// comparison cannot: something removed from the desired state (a
	// volume, a container, a rule).
	rendered, err := json.Marshal(desired)
	if err != nil {
		return err
	}
	desired.SetAnnotations(merged(desired.GetAnnotations(), map[string]string{AnnotationRenderedHash: digest(string(rendered))[:16]}))
	metadata, metadataOnly := existing.(*metav1.PartialObjectMetadata)
	var fill func() error
	if metadataOnly {
		fill = update
	}
	if created, err := getOrCreate(ctx, p, g, desired, existing, fill); err != nil || created {
		return err
	}
	if exclusiveChild(desired) {
		gvk, err := apiutil.GVKForObject(desired, p.cluster.Scheme)
		if err != nil {
			return err
		}
		if err := refuseForeign(existing, gvk.Kind, g); err != nil {
			return err
		}
	}
	labels, annotations := existing.GetLabels(), existing.GetAnnotations()
	metaInSync := subset(desired.GetLabels(), labels) && subset(desired.GetAnnotations(), annotations)
	owned := existing.DeepCopyObject().(client.Object)
	if err := p.cluster.SetOwner(g, owned); err != nil {
		return err
	}
	ownerInSync := equality.Semantic.DeepEqual(owned.GetOwnerReferences(), existing.GetOwnerReferences()) &&
		subset(owned.GetLabels(), labels)
	if inSync() && metaInSync && ownerInSync {
		return nil
	}
	if err := update(); err != nil {
		return err
	}
	existing.SetLabels(merged(labels, desired.GetLabels()))
	existing.SetAnnotations(merged(annotations, desired.GetAnnotations()))
	if err := p.cluster.SetOwner(g, existing); err != nil {
		return err
	}
	write := existing
	if metadataOnly {
		// desired's content in existing's place: its metadata, and the
		// resourceVersion the write is conditional on.
		write = desired
		om, err := objectMeta(write)
		if err != nil {
			return err
		}
		*om = *metadata.ObjectMeta.DeepCopy()
	}
	if err := p.cluster.Client.Update(ctx, write); err != nil {
		return fmt.Errorf("update %T %s: %w", write, write.GetName(), err)
	}
	if metadataOnly {
		om, _ := objectMeta(write)
		metadata.ObjectMeta = *om.DeepCopy()
	}
	return nil
}

// objectMeta is the metadata of obj, a typed object (as those read as
// metadata only are: a Secret), to read or replace whole.
func objectMeta(obj client.Object) (*metav1.ObjectMeta, error) {
	if accessor, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := accessor.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return om, nil
		}
	}
	return nil, fmt.Errorf("%T is not a typed object", obj)
}

// getOrCreate reads the child desired names into existing, from the cache,
// or creates it as desired, owned by g, when it is not there; created says
// which. existing then holds what the server answered, so status checks
// read what exists even before the cache has it. fill, if any, completes
// desired before it is created: for a child read as metadata only, whose
// content is made only for a write.
func getOrCreate(ctx context.Context, p *pass, g *v1alpha1.Glance, desired, existing client.Object, fill func() error) (created bool, _ error) {
	key := client.ObjectKeyFromObject(desired)
	err := p.cluster.Client.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		if err := p.cluster.SetOwner(g, desired); err != nil {
			return false, err
		}
		if fill != nil {
			if err := fill(); err != nil {
				return false, err
			}
		}
		err = p.cluster.Client.Create(ctx, desired)
		switch {
		case err == nil:
			if m, ok := existing.(*metav1.PartialObjectMetadata); ok {
				// Only the metadata: the content stays desired's.
				om, err := objectMeta(desired)
				if err != nil {
					return false, err
				}
				m.ObjectMeta = *om.DeepCopy()
				return true, nil
			}
			answered, err := json.Marshal(desired)
			if err != nil {
				return false, err
			}
			return true, json.Unmarshal(answered, existing)
		case !apierrors.IsAlreadyExists(err):
			return false, fmt.Errorf("create %T %s: %w", desired, desired.GetName(), err)
		}
		// The cache lags behind the server (after an API server restart,
		// say): the child is there. Read it from the server and go on as
		// if the cache had held it.
		err = p.cluster.Reader.Get(ctx, key, existing)
	}
	if err != nil {
		return false, fmt.Errorf("get %T %s: %w", desired, desired.GetName(), err)
	}
	return false, nil
}

// applySpec applies a child whose desired state is its spec, want the
// desired object's and have the existing one's: it is in sync while have
// holds every field want sets, and an update takes want whole, after keep,
// if any, has copied into it what others own.
func applySpec[S any](ctx context.Context, p *pass, g *v1alpha1.Glance, desired client.Object, want *S, existing client.Object, have *S, keep func()) error {
	return applyChild(ctx, p, g, desired, existing, func() bool {
		return equality.Semantic.DeepDerivative(*want, *have)
	}, func() error {
		if keep != nil {
			keep()
		}
		*have = *want
		return nil
	})
}

// foreignAnnotations are those of annotations the operator never renders.
func foreignAnnotations(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		if !render.IsOperatorAnnotation(k) {
			out[k] = v
		}
	}
	return out
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func merged(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}
