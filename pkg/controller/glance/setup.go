package glance

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glances/finalizers,verbs=update
// +kubebuilder:rbac:groups=glance.openstack.c5c3.io,resources=glancebackends,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=external-secrets.io,resources=clustersecretstores;secretstores;externalsecrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=k8s.mariadb.com,resources=mariadbs,verbs=get;list;watch
// +kubebuilder:rbac:groups=k8s.mariadb.com,resources=databases;users;grants,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the Glance controller; pkg/operator has
// registered the field indexes it lists by. references is a metadata-only
// cache of the user's Secrets and ConfigMaps: their changes wake the
// Glances that read them, while their contents are read from the API server
// (a Secret only when its resourceVersion moved; what is derived from it is
// kept, never its values), so the operator's memory does not grow with
// unrelated Secrets.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, references *targetcluster.References, opts controller.Options) error {
	r.written.Limit = r.StaleCacheLimit
	stages := func(stages []pipeline.Stage[*v1alpha1.Glance, *pass]) *pipeline.Pipeline[*v1alpha1.Glance, *pass] {
		return &pipeline.Pipeline[*v1alpha1.Glance, *pass]{
			Stages: stages, Aggregate: v1alpha1.ConditionReady, SubConditions: v1alpha1.SubConditions,
			Metrics: r.Metrics.Reconcile, Status: r.Client.Status(), StepFailed: stepFailed, Detail: readyDetail,
			Stored: r.announcePause, Health: &pipeline.Health{Stalled: stalls},
		}
	}
	r.pipeline, r.unresolved, r.refused, r.paused = stages(Steps), stages(unresolvedSteps), stages(refusedSteps), stages(nil)
	r.paused.Hold = &pipeline.Hold{Reason: v1alpha1.ReasonPaused, Message: pausedMessage}

	b := ctrl.NewControllerManagedBy(mgr).
		Named("glance").
		WithOptions(opts).
		For(&v1alpha1.Glance{}).
		// Metadata only: the child Secrets carry credentials, which the
		// operator keeps no copy of (targetcluster.NewCache).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&appsv1.Deployment{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&batchv1.Job{}).
		// A spawned run starting or finishing changes status.active, which
		// wakes the pass that refreshes DBPurgeReady.
		Owns(&batchv1.CronJob{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// A purge run is controlled by the CronJob, not the Glance; a run
		// started by hand never shows in the CronJob's status, so its end
		// must wake the Glance directly.
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(purgeRunToGlance)).
		// No generation predicate: a backend's CredentialsReady flip is
		// exactly what wakes the aggregation.
		Watches(&v1alpha1.GlanceBackend{}, handler.EnqueueRequestsFromMapFunc(backendToGlance)).
		// The API Service gaining its first ready endpoint, or losing its
		// last, is what the HealthCheck waits for.
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(apiChildToGlance),
			builder.WithPredicates(endpointReadinessChanged)).
		// An API pod the kubelet evicted for its image cache is what the
		// Deployment step reports; no other pod change wakes a pass.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(apiChildToGlance),
			builder.WithPredicates(imageCacheEvictionSeen))

	// The optional APIs are watched when installed at setup; without them
	// the steps report what is missing through conditions.
	mapper := mgr.GetRESTMapper()
	if _, err := mapper.RESTMapping(httpRouteGVK.GroupKind(), httpRouteGVK.Version); err == nil {
		r.GatewayAPI = true
		b = b.Owns(&gatewayv1.HTTPRoute{})
	} else {
		log.FromContext(ctx).Info("Gateway API not installed; spec.gateway will report GatewayAPINotInstalled")
	}
	for _, w := range optionalWatches() {
		if w.index == "" {
			continue // owned: below
		}
		if _, err := mapper.RESTMapping(w.gvk.GroupKind(), w.gvk.Version); err != nil {
			log.FromContext(ctx).Info("optional API not installed; not watching it", "kind", w.gvk.String())
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(w.gvk)
		b = b.Watches(u, handler.EnqueueRequestsFromMapFunc(r.indexedGlances(w.index, w.key)))
	}
	// The managed database objects are owned; their Ready flips wake the
	// Glance.
	for _, gvk := range []schema.GroupVersionKind{render.DatabaseGVK, render.UserGVK, render.GrantGVK} {
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		b = b.Owns(u)
		if gvk == render.UserGVK {
			if err := mgr.GetFieldIndexer().IndexField(ctx, u.DeepCopy(), v1alpha1.IndexUserSQLUser, userSQLUserIndex); err != nil {
				return err
			}
			r.usersIndexed = true
		}
	}
	// The user's Secrets and ConfigMaps are watched in each namespace's
	// references cache as it starts, and a target's children once it
	// connects: both are added to the running controller. The queue source
	// lets a stopped target wake its Glances.
	queue := &queueSource{}
	ctl, err := b.WatchesRawSource(queue).Build(r)
	if err != nil {
		return err
	}
	references.OnNamespace(func(_ context.Context, c cache.Cache) {
		for _, src := range r.referenceSources(c) {
			if err := ctl.Watch(src); err != nil {
				log.FromContext(ctx).Error(err, "watch the user's Secrets and ConfigMaps")
			}
		}
	})
	if r.Targets == nil {
		return nil
	}
	r.Targets.OnStart(func(ctx context.Context, t *targetcluster.Target) {
		r.watchTarget(ctx, ctl, t)
		// A Glance waiting on TargetClusterUnavailable need not wait for
		// its requeue.
		r.enqueueTargeting(t.Name, queue)
	})
	r.Targets.OnStop(func(name string) { r.enqueueTargeting(name, queue) })
	r.Targets.OnReachabilityChange(func(name string) { r.enqueueTargeting(name, queue) })
	return nil
}

// referenceSources watch the user's Secrets and ConfigMaps in a
// namespace's references cache, mapped to the Glances (and, for a Secret,
// the backends' Glances) that read them.
func (r *Reconciler) referenceSources(c cache.Cache) []source.Source {
	return []source.Source{
		source.Kind(c, metadataOf("", "v1", "Secret"), handler.TypedEnqueueRequestsFromMapFunc(r.secretToGlances)),
		source.Kind(c, metadataOf("", "v1", "ConfigMap"),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, cm *metav1.PartialObjectMetadata) []reconcile.Request {
				return r.indexedGlances(v1alpha1.IndexGlanceConfigMap, nil)(ctx, cm)
			})),
	}
}

// Targets are the hooks of the target cluster registry.
type Targets interface {
	OnStart(func(context.Context, *targetcluster.Target))
	OnStop(func(string))
	OnReachabilityChange(func(string))
}

// watchTarget watches a connected target's children, mapped back by their
// owner labels, its user Secrets and ConfigMaps, and the optional APIs it
// serves, until ctx (the target's run) ends.
func (r *Reconciler) watchTarget(ctx context.Context, ctl controller.Controller, t *targetcluster.Target) {
	logger := log.FromContext(ctx).WithValues("cluster", t.Name)
	watch := func(src source.Source) {
		if err := ctl.Watch(TargetSource(ctx, src)); err != nil {
			logger.Error(err, "watch a target cluster")
		}
	}
	owned := handler.EnqueueRequestsFromMapFunc(ownerToGlance)
	for _, obj := range targetcluster.OwnedKinds() {
		watch(source.Kind(t.GetCache(), obj, owned))
	}
	watch(source.Kind[client.Object](t.GetCache(), &discoveryv1.EndpointSlice{}, owned, endpointReadinessChanged))
	// The pods carry the template's labels, not the owner labels: mapped
	// by instance, the Glance is the one of that name in the namespace.
	watch(source.Kind[client.Object](t.GetCache(), &corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(apiChildToGlance), imageCacheEvictionSeen))
	t.References.OnNamespace(func(_ context.Context, c cache.Cache) {
		for _, src := range r.referenceSources(c) {
			watch(src)
		}
	})
	for _, w := range optionalWatches() {
		if _, err := t.GetRESTMapper().RESTMapping(w.gvk.GroupKind(), w.gvk.Version); err != nil {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(w.gvk)
		if w.index == "" {
			watch(source.Kind[client.Object](t.GetCache(), u, owned))
		} else {
			watch(source.Kind[client.Object](t.GetCache(), u, handler.EnqueueRequestsFromMapFunc(r.indexedGlances(w.index, w.key))))
		}
	}
}

// enqueueTargeting wakes the Glances naming a target that started,
// stopped, or stopped or started answering, so they converge or report
// TargetClusterUnavailable at once.
func (r *Reconciler) enqueueTargeting(name string, queue *queueSource) {
	// Before the controller starts (the manager's cache may not have
	// synced; a replica not leading) there is nothing to wake, and a list
	// could block the registry.
	if !queue.started() {
		return
	}
	var list v1alpha1.GlanceList
	if err := r.Client.List(context.Background(), &list, client.MatchingFields{v1alpha1.IndexGlanceTargetCluster: name}); err != nil {
		log.Log.Error(err, "list the Glances of a target cluster", "cluster", name)
		return
	}
	for i := range list.Items {
		queue.add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
}

// ownerToGlance maps a target child to its Glance by its owner labels; a
// db-purge run carries the CronJob template's labels instead.
func ownerToGlance(ctx context.Context, o client.Object) []reconcile.Request {
	if key, ok := targetcluster.OwnerOf(o.GetLabels(), "Glance"); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return purgeRunToGlance(ctx, o)
}

// TargetSource runs src until life, a target's run, ends; for watches
// added to a running controller when a target connects.
func TargetSource(life context.Context, src source.Source) source.Source {
	return &targetSource{life: life, src: src}
}

// targetSource runs src until the target's run (life) ends. It never
// reports a sync error: a target that stops before the controller starts
// must not fail the controller.
type targetSource struct {
	life context.Context
	src  source.Source
}

func (s *targetSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	context.AfterFunc(ctx, func() { stop() })
	return s.src.Start(ctx, q)
}

func (s *targetSource) String() string { return fmt.Sprintf("target cluster %v", s.src) }

// queueSource hands the controller's queue to enqueueTargeting; before the
// controller starts there is nothing to wake, its start lists every Glance.
type queueSource struct {
	mu sync.Mutex
	q  workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func (s *queueSource) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.q = q
	return nil
}

func (s *queueSource) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q != nil
}

func (s *queueSource) add(req reconcile.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q != nil {
		s.q.Add(req)
	}
}

type optionalWatch struct {
	gvk   schema.GroupVersionKind
	index string // empty: an owned kind, mapped by owner
	key   func(client.Object) string
}

// optionalWatches are the optional APIs a Glance reads (the stores and the
// MariaDB cluster, mapped by index) and the database objects it owns.
func optionalWatches() []optionalWatch {
	return []optionalWatch{
		{gvk: clusterSecretStoreGVK, index: v1alpha1.IndexGlanceSecretStore, key: func(o client.Object) string {
			return string(v1alpha1.ClusterSecretStoreKind) + "/" + o.GetName()
		}},
		{gvk: secretStoreGVK, index: v1alpha1.IndexGlanceSecretStore, key: func(o client.Object) string {
			return string(v1alpha1.SecretStoreKindName) + "/" + o.GetName()
		}},
		{gvk: render.MariaDBGVK, index: v1alpha1.IndexGlanceMariaDB, key: func(o client.Object) string { return o.GetName() }},
		{gvk: render.DatabaseGVK}, {gvk: render.UserGVK}, {gvk: render.GrantGVK},
	}
}

func metadataOf(group, version, kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	return m
}

// purgeRunToGlance maps a db-purge run (labels of the CronJob's template)
// to its Glance.
func purgeRunToGlance(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[render.LabelComponent] != render.ComponentDBPurge || l[render.LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: l[render.LabelInstance]}}}
}

// apiChildToGlance maps an API pod, or a slice of an API Service, to its
// Glance by the instance label: the EndpointSlice controller copies the
// Service's labels onto its slices, and the pods carry the template's.
func apiChildToGlance(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[render.LabelComponent] != render.ComponentAPI || l[render.LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: l[render.LabelInstance]}}}
}

// endpointReadinessChanged lets through the slices that appear or go, and
// those that gain their first ready endpoint or lose their last; the other
// churn of endpoints does not change what the HealthCheck decides.
var endpointReadinessChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*discoveryv1.EndpointSlice)
		cur, curOK := e.ObjectNew.(*discoveryv1.EndpointSlice)
		return !oldOK || !curOK || (readyEndpoints(old) > 0) != (readyEndpoints(cur) > 0)
	},
}

func backendToGlance(_ context.Context, o client.Object) []reconcile.Request {
	b := o.(*v1alpha1.GlanceBackend)
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.GlanceRef.Name}}}
}

// indexedGlances maps an object to the Glances whose index field holds its
// key (its name unless key says otherwise); cluster-scoped objects match in
// every namespace.
func (r *Reconciler) indexedGlances(index string, key func(client.Object) string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		k := o.GetName()
		if key != nil {
			k = key(o)
		}
		opts := []client.ListOption{client.MatchingFields{index: k}}
		if o.GetNamespace() != "" {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		var list v1alpha1.GlanceList
		if err := r.Client.List(ctx, &list, opts...); err != nil {
			log.FromContext(ctx).Error(err, "map to Glances", "index", index, "key", k)
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, g := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&g)})
		}
		return reqs
	}
}

// secretToGlances maps a Secret to the Glances that read it directly and to
// the parents of the backends whose credentials it holds.
func (r *Reconciler) secretToGlances(ctx context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
	reqs := r.indexedGlances(v1alpha1.IndexGlanceSecret, nil)(ctx, s)
	var backends v1alpha1.GlanceBackendList
	if err := r.Client.List(ctx, &backends, client.InNamespace(s.Namespace), client.MatchingFields{v1alpha1.IndexBackendSecret: s.Name}); err != nil {
		log.FromContext(ctx).Error(err, "map Secret to backends", "secret", s.Name)
		return reqs
	}
	for i := range backends.Items {
		reqs = append(reqs, backendToGlance(ctx, &backends.Items[i])...)
	}
	return reqs
}
