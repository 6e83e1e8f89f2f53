// Package glance is the Glance reconciler: the nine-step pipeline, one file
// per step, plus target resolution, the finalizer and the watches.
package glance

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission"
	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// Finalizer holds a Glance until the database objects it created are gone.
const Finalizer = "glance.openstack.c5c3.io/finalizer"

// Reconciler reconciles Glance objects.
type Reconciler struct {
	// Client reads and writes the Glance CRs and GlanceBackends on the
	// management cluster.
	Client client.Client
	// Resolver finds the cluster a Glance's children live on.
	Resolver targetcluster.Resolver
	// Targets, when set, are the registry's hooks: the controller watches
	// each target's children while it runs. Nil serves the management
	// cluster only.
	Targets Targets
	// Recorder emits events on the Glance.
	Recorder events.EventRecorder
	// Metrics are the operator's collectors.
	Metrics *metrics.Metrics
	// OperatorNamespace is where the operator runs; the NetworkPolicy
	// admits its health probes from there.
	OperatorNamespace string
	// Prober checks /healthcheck; Probes caches its passing answers.
	Prober Prober
	Probes *ProbeCache
	// GatewayAPI says whether the management cluster served the Gateway
	// API when the controller was set up.
	GatewayAPI bool
	// ClusterDomain is the cluster DNS domain of the Services' names;
	// empty means render.DefaultClusterDomain.
	ClusterDomain string
	// StaleCacheLimit is how long a cached Glance may stay older than this
	// manager's last write to it before it is taken as current; zero means
	// pipeline.DefaultStaleCacheLimit.
	StaleCacheLimit time.Duration

	// usersIndexed says whether the management cluster's cache indexes
	// Users by IndexUserSQLUser: the User API was served at setup.
	usersIndexed bool
	pipeline     *pipeline.Pipeline[*v1alpha1.Glance, *pass]
	unresolved   *pipeline.Pipeline[*v1alpha1.Glance, *pass]
	refused      *pipeline.Pipeline[*v1alpha1.Glance, *pass]
	paused       *pipeline.Pipeline[*v1alpha1.Glance, *pass]
	written      pipeline.WrittenVersions
	progress     pipeline.Progress
}

// pass is the state of one reconcile: where the children live and what the
// steps learnt for the steps after them. Parallel group members only read it.
type pass struct {
	r       *Reconciler
	cluster *targetcluster.Cluster
	// resolveErr is why the target cluster did not resolve.
	resolveErr error
	// refusal is what the admission rules refuse in the spec.
	refusal field.ErrorList

	// Secrets.
	digestKey   []byte
	credentials credentials
	// dsn is the DSN of the connection Secret, known to a pass that read
	// what it is made of; never kept beyond the pass.
	dsn string
	// dsnHash is the keyed digest of the DSN of the connection Secret.
	dsnHash string
	// dbPassword is the credentials Secret's database password, known to a
	// pass that read the credentials; never kept beyond the pass.
	dbPassword string
	// DatabaseUsers: the slot of the user the DSN names, and that user,
	// empty unless the operator makes the database users. The user is the
	// slot's own, which a new user name in the credentials Secret does not
	// change: that is a rotation onto the other slot. dbSlotCurrent says
	// that the slot holds the credentials' password for its user.
	dbSlot        database.Slot
	dbUser        string
	dbSlotCurrent bool
	// rotationWait says what a database user rotation waits for; empty
	// when none waits. The Database step reports it on DatabaseReady.
	rotationWait string
	// recheck is when to look again at what waits for time to pass without
	// holding the steps after it back (a rotation waiting out the old
	// pods' grace, a schema Job's retry while the schema serves); zero for
	// no such wait. recheckAfter keeps the soonest.
	recheck time.Duration
	// Database: why each schema Job that never started did not, by UID.
	stuckJobs map[types.UID]string
	// DBConnectionSecret.
	dbConnectionHash string
	// Backends.
	backends backendsProjection
	// Config.
	configMapName string
}

// recheckAfter asks for the pass to come back after d at the latest; zero
// asks nothing.
func (p *pass) recheckAfter(d time.Duration) {
	if d > 0 && (p.recheck == 0 || d < p.recheck) {
		p.recheck = d
	}
}

// Reconcile runs the pipeline for one Glance.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	g := &v1alpha1.Glance{}
	if err := r.Client.Get(ctx, req.NamespacedName, g); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.NamespacedName)
			r.progress.Forget(req.NamespacedName)
			// Finalize drops them too, at once; this catches a Glance
			// deleted before it had a finalizer, which has series too
			// (TrackGlance).
			r.Metrics.ForgetGlance(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("glance", req.NamespacedName))
	switch r.written.Check(req.NamespacedName, g.ResourceVersion) {
	case pipeline.Stale:
		log.FromContext(ctx).V(1).Info("Cached Glance is older than this manager's last write; waiting for the cache", "resourceVersion", g.ResourceVersion)
		return ctrl.Result{RequeueAfter: pipeline.StaleCacheRetry}, nil
	case pipeline.GaveUp:
		log.FromContext(ctx).Info("Cached Glance stayed older than this manager's last write; taking it as current (resourceVersions went back, as after an etcd restore)",
			"resourceVersion", g.ResourceVersion, "after", r.written.GiveUpAfter())
	}
	result, err := r.reconcile(ctx, g)
	if controllerutil.ContainsFinalizer(g, Finalizer) || g.DeletionTimestamp.IsZero() {
		r.written.Record(req.NamespacedName, g.ResourceVersion)
		done := r.pipeline.Done(g)
		r.progress.Record(req.NamespacedName, done)
		result.Priority = &done
	} else {
		r.written.Forget(req.NamespacedName)
		r.progress.Forget(req.NamespacedName)
	}
	return result, err
}

// Priority ranks a Glance in the controller's queue by how far its last pass
// got: when more Glances wait than there are workers, the nearest to Ready go
// first.
func (r *Reconciler) Priority(req ctrl.Request) int {
	return r.progress.Of(req.NamespacedName)
}

// reconcile runs on a Glance at least as new as this manager's last write to
// it. Every write to the Glance refreshes g, so g's resourceVersion after it
// is that of the newest write.
func (r *Reconciler) reconcile(ctx context.Context, g *v1alpha1.Glance) (ctrl.Result, error) {
	cluster, resolveErr := r.Resolver.Resolve(ctx, g.Spec.TargetClusterRef)
	if !g.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, g, cluster, resolveErr)
	}
	r.Metrics.TrackGlance(g.Namespace, g.Name)
	if g.Paused() {
		// No step runs: nothing of the Glance changes, not even its
		// finalizer; only Ready says why.
		return r.paused.Run(ctx, g, &pass{r: r, cluster: cluster})
	}
	p := &pass{r: r, cluster: cluster}
	if resolveErr != nil {
		// Nothing is created anywhere and no finalizer is taken: there is
		// nothing to clean up for a target that never resolved.
		return r.unresolved.Run(ctx, g, &pass{r: r, cluster: nil, resolveErr: resolveErr})
	}
	if errs := admission.ValidateGlanceSpec(g); len(errs) > 0 {
		// A spec the webhook would refuse renders nothing; the finalizer
		// waits too, for a Glance that never got one has nothing to clean.
		return r.refused.Run(ctx, g, &pass{r: r, cluster: cluster, refusal: errs})
	}
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		if err := r.patchFinalizers(ctx, g, controllerutil.AddFinalizer); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	// The Secrets and ConfigMaps a pass reads, and whose changes wake it,
	// are watched from the first pass in a namespace on.
	if err := cluster.WatchReferences(ctx, g.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.pipeline.Run(ctx, g, p)
	if err == nil && p.recheck > 0 && (result.IsZero() || result.RequeueAfter > p.recheck) {
		result = ctrl.Result{RequeueAfter: p.recheck}
	}
	return result, err
}

// pausedMessage is Ready's message while AnnotationPaused holds a Glance.
var pausedMessage = "Paused by the annotation " + v1alpha1.AnnotationPaused + `="true": the operator changes nothing of this Glance until it is removed; Ready keeps the status it had.`

// announcePause announces a Glance's pause and its end once each, when the
// status that records it (Ready's reason) is stored.
func (r *Reconciler) announcePause(_ context.Context, before, after *v1alpha1.Glance) {
	was, is := readyReason(before) == v1alpha1.ReasonPaused, readyReason(after) == v1alpha1.ReasonPaused
	switch {
	case is && !was:
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, v1alpha1.ReasonPaused, "Pause", "%s", pausedMessage)
	case was && !is:
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, v1alpha1.EventResumed, "Resume", "%s was removed: the operator reconciles this Glance again", v1alpha1.AnnotationPaused)
	}
}

func readyReason(g *v1alpha1.Glance) string {
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// targetUnavailable reports an unresolvable targetClusterRef ahead of every
// step.
func targetUnavailable(_ context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	msg := p.resolveErr.Error()
	if !g.DeletionTimestamp.IsZero() {
		msg = "the deletion waits to clean up the target cluster: " + msg
	}
	pipeline.SetCondition(g, v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable, msg)
	return ctrl.Result{RequeueAfter: SecretsPollInterval}, nil
}

// specRefused reports the admission rules a spec breaks, ahead of every step.
// Like any ConfigError it is terminal: only a spec change can fix it.
func specRefused(_ context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	return terminalFailure(g, v1alpha1.ConditionSecretsReady, v1alpha1.ReasonConfigError,
		"the spec breaks admission rules, so nothing is rendered from it until it is fixed: "+p.refusal.ToAggregate().Error())
}

// finalize runs on a Glance being deleted.
func (r *Reconciler) finalize(ctx context.Context, g *v1alpha1.Glance, cluster *targetcluster.Cluster, resolveErr error) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		return ctrl.Result{}, nil
	}
	if resolveErr != nil && !errors.Is(resolveErr, targetcluster.ErrNotRegistered) {
		// The target is still registered but does not answer (an outage,
		// a refused kubeconfig, a manager that has not read the
		// kubeconfigs yet): the finalizer stays, and the deletion finishes
		// with its cleanup once the target answers again.
		return r.unresolved.Run(ctx, g, &pass{r: r, resolveErr: resolveErr})
	}
	if resolveErr != nil {
		// Whoever cleans up the target needs the objects, not their kinds:
		// the credentials among them above all.
		r.Recorder.Eventf(g, nil, corev1.EventTypeWarning, v1alpha1.EventRemoteChildrenAbandoned, "Finalize", "%s", abandonNote(g))
	} else {
		remaining, err := deleteDatabaseObjects(ctx, cluster, g)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !cluster.IsManagement() {
			// No owner references cross clusters, so no garbage collector
			// takes the target's children: delete them by owner label.
			children, err := deleteTargetChildren(ctx, cluster, g)
			if err != nil {
				return ctrl.Result{}, err
			}
			remaining = append(remaining, children...)
		}
		if len(remaining) > 0 {
			r.Recorder.Eventf(g, nil, corev1.EventTypeNormal, v1alpha1.EventFinalizingDatabase, "Finalize", "waiting for %v to be deleted", remaining)
			return ctrl.Result{RequeueAfter: DatabasePollInterval}, nil
		}
		r.Recorder.Eventf(g, nil, corev1.EventTypeNormal, v1alpha1.EventDatabaseFinalized, "Finalize", "the database objects are gone; releasing the finalizer")
	}
	if err := r.patchFinalizers(ctx, g, controllerutil.RemoveFinalizer); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	r.Metrics.ForgetGlance(g.Namespace, g.Name)
	r.Probes.Forget(g.UID)
	return ctrl.Result{}, nil
}

// patchFinalizers adds or removes the operator's finalizer. A merge patch
// replaces the whole list, so it carries g's resourceVersion: a finalizer
// another controller added since g was read fails it with a conflict, and
// the retry starts from the list as it is, rather than dropping that one.
func (r *Reconciler) patchFinalizers(ctx context.Context, g *v1alpha1.Glance, edit func(client.Object, string) bool) error {
	patch := client.MergeFromWithOptions(g.DeepCopy(), client.MergeFromWithOptimisticLock{})
	edit(g, Finalizer)
	return r.Client.Patch(ctx, g, patch)
}

// announce emits an event on g for a transition the pass records in g's
// status, once that status is stored: a pass whose write failed runs again
// and announces the transition then, so it is announced once.
func announce(ctx context.Context, p *pass, g *v1alpha1.Glance, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	regarding := g.DeepCopy()
	text := pipeline.Truncate(fmt.Sprintf(note, args...), maxEventNote)
	pipeline.AfterStatusWrite(ctx, func() {
		p.r.Recorder.Eventf(regarding, related, eventtype, reason, action, "%s", text)
	})
}

// maxEventNote is the API's bound on an event's note: the API server
// refuses a longer one, and the event is lost.
const maxEventNote = 1024

func (r *Reconciler) clusterDomain() string {
	if r.ClusterDomain == "" {
		return render.DefaultClusterDomain
	}
	return r.ClusterDomain
}
