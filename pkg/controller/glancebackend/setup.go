package glancebackend

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glancebackends,verbs=get;list;watch
// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glancebackends/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glances,verbs=get;list;watch

// SetupWithManager registers the controller. The Glance reconciler must be
// set up first: it registers the field indexes this controller lists by.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, references *targetcluster.References, opts controller.Options) error {
	r.written.Limit = r.StaleCacheLimit
	r.pipeline = &pipeline.Pipeline[*v1alpha1.GlanceBackend, *pass]{
		Stages: Steps, Aggregate: v1alpha1.ConditionReady, SubConditions: v1alpha1.BackendSubConditions,
		Metrics: r.Metrics.Reconcile, Status: r.Client.Status(),
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"})
	secretToBackends := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
		return r.list(ctx, s.Namespace, v1alpha1.IndexBackendSecret, s.Name)
	})
	deploymentToBackends := handler.EnqueueRequestsFromMapFunc(r.backendsOf(func(o client.Object) (string, string) {
		return o.GetNamespace(), o.GetLabels()[render.LabelInstance]
	}))
	b := ctrl.NewControllerManagedBy(mgr).
		Named("glancebackend").
		WithOptions(opts).
		For(&v1alpha1.GlanceBackend{}).
		// No generation predicate: the store config landing in the parent's
		// Deployment shows in its status, and that is the wake signal.
		Watches(&v1alpha1.Glance{}, handler.EnqueueRequestsFromMapFunc(r.backendsOf(func(o client.Object) (string, string) {
			return o.GetNamespace(), o.GetName()
		}))).
		Watches(&appsv1.Deployment{}, deploymentToBackends)
	ctl, err := b.Build(r)
	if err != nil {
		return err
	}
	// The credentials Secrets are watched in each namespace's references
	// cache as it starts.
	references.OnNamespace(func(ctx context.Context, c cache.Cache) {
		if err := ctl.Watch(source.Kind(c, secret.DeepCopy(), secretToBackends)); err != nil {
			log.FromContext(ctx).Error(err, "watch the credentials Secrets")
		}
	})
	if r.Targets == nil {
		return nil
	}
	// On a target the credentials Secret and the parent's Deployment are
	// watched there, while it runs.
	r.Targets.OnStart(func(ctx context.Context, t *targetcluster.Target) {
		t.References.OnNamespace(func(_ context.Context, c cache.Cache) {
			if err := ctl.Watch(glance.TargetSource(ctx, source.Kind(c, secret.DeepCopy(), secretToBackends))); err != nil {
				log.FromContext(ctx).Error(err, "watch a target cluster", "cluster", t.Name)
			}
		})
		if err := ctl.Watch(glance.TargetSource(ctx, source.Kind[client.Object](t.GetCache(), &appsv1.Deployment{}, deploymentToBackends))); err != nil {
			log.FromContext(ctx).Error(err, "watch a target cluster", "cluster", t.Name)
		}
	})
	return nil
}

// backendsOf maps an object to the backends of the Glance it names.
func (r *Reconciler) backendsOf(glanceOf func(client.Object) (namespace, name string)) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		ns, name := glanceOf(o)
		if name == "" {
			return nil
		}
		return r.list(ctx, ns, v1alpha1.IndexBackendGlance, name)
	}
}

func (r *Reconciler) list(ctx context.Context, namespace, index, value string) []reconcile.Request {
	var list v1alpha1.GlanceBackendList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index: value}); err != nil {
		log.FromContext(ctx).Error(err, "map to GlanceBackends", "index", index, "value", value)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
