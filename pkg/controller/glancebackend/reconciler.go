// Package glancebackend is the GlanceBackend controller, the single writer of
// GlanceBackend status: CredentialsReady (its S3 credentials Secret holds
// both keys), ConfigProjected (the parent's Deployment mounts a backends
// Secret with this store's section), and Ready (both). It has no finalizer:
// the operator provisions nothing in S3.
package glancebackend

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// PollInterval is the backstop while credentials or the projection are
// awaited; the watches usually come first.
const PollInterval = 15 * time.Second

// Reconciler reconciles GlanceBackend objects.
type Reconciler struct {
	// Client reads the GlanceBackends and their parent Glances on the
	// management cluster.
	Client client.Client
	// Resolver finds the parent's cluster, where the credentials Secret and
	// the Deployment are read.
	Resolver targetcluster.Resolver
	// Targets, when set, are the registry's hooks; nil serves the
	// management cluster only.
	Targets glance.Targets
	Metrics *metrics.Metrics
	// StaleCacheLimit is how long a cached GlanceBackend may stay older
	// than this manager's last write to it before it is taken as current;
	// zero means pipeline.DefaultStaleCacheLimit.
	StaleCacheLimit time.Duration

	pipeline *pipeline.Pipeline[*v1alpha1.GlanceBackend, *pass]
	written  pipeline.WrittenVersions
}

// pass is the state of one reconcile.
type pass struct {
	parent     *v1alpha1.Glance
	cluster    *targetcluster.Cluster
	waiting    string // why CredentialsReady is not True: the reason
	waitingMsg string
}

type step = pipeline.Step[*v1alpha1.GlanceBackend, *pass]

// Steps of the GlanceBackend pipeline. Credentials never end the pass, so
// that ConfigProjected is always re-evaluated.
var Steps = []pipeline.Stage[*v1alpha1.GlanceBackend, *pass]{
	pipeline.Single(step{Name: "BackendCredentials", Condition: v1alpha1.ConditionCredentialsReady, FailureReason: v1alpha1.ReasonWaitingForCredentials, Run: reconcileCredentials}),
	pipeline.Single(step{Name: "BackendProjection", Condition: v1alpha1.ConditionConfigProjected, FailureReason: v1alpha1.ReasonWaitingForProjection, Run: reconcileProjection}),
}

// Reconcile resolves the parent and its cluster, then runs the pipeline.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1alpha1.GlanceBackend{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		r.written.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	// A pass on a copy older than the last status write would write that
	// status again.
	switch r.written.Check(req.NamespacedName, b.ResourceVersion) {
	case pipeline.Stale:
		return ctrl.Result{RequeueAfter: pipeline.StaleCacheRetry}, nil
	case pipeline.GaveUp:
		log.FromContext(ctx).Info("Cached GlanceBackend stayed older than this manager's last write; taking it as current (resourceVersions went back, as after an etcd restore)",
			"resourceVersion", b.ResourceVersion, "after", r.written.GiveUpAfter())
	}
	p := &pass{}
	parent := &v1alpha1.Glance{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.GlanceRef.Name}, parent)
	switch {
	case apierrors.IsNotFound(err):
		p.waiting, p.waitingMsg = v1alpha1.ReasonWaitingForParent, fmt.Sprintf("Glance %q not found", b.Spec.GlanceRef.Name)
	case err != nil:
		return ctrl.Result{}, err
	default:
		p.parent = parent
		cluster, err := r.Resolver.Resolve(ctx, parent.Spec.TargetClusterRef)
		if err != nil {
			p.waiting, p.waitingMsg = v1alpha1.ReasonTargetClusterUnavailable, err.Error()
		} else if err := cluster.WatchReferences(ctx, b.Namespace); err != nil {
			return ctrl.Result{}, err
		}
		p.cluster = cluster
	}
	result, err := r.pipeline.Run(ctx, b, p)
	r.written.Record(req.NamespacedName, b.ResourceVersion)
	return result, err
}

func reconcileCredentials(ctx context.Context, b *v1alpha1.GlanceBackend, p *pass) (ctrl.Result, error) {
	if p.waiting == "" {
		msg, err := credentialsProblem(ctx, p.cluster, b)
		if err != nil {
			return ctrl.Result{}, err
		}
		if msg != "" {
			p.waiting, p.waitingMsg = v1alpha1.ReasonWaitingForCredentials, msg
		}
	}
	if p.waiting != "" {
		pipeline.SetCondition(b, v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, p.waiting, p.waitingMsg)
		return ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("Secret %q holds %s and %s", b.Spec.S3.CredentialsSecretRef.Name, v1alpha1.S3AccessKeyIDKey, v1alpha1.S3SecretAccessKeyKey)
	if ca := b.Spec.S3.CABundleSecretRef; ca != nil {
		msg += fmt.Sprintf("; Secret %q holds the CA bundle", ca.Name)
	}
	pipeline.SetCondition(b, v1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, v1alpha1.ReasonCredentialsAvailable, msg)
	return ctrl.Result{}, nil
}

// credentialsProblem says what is wrong with the credentials Secret, never
// quoting a value.
func credentialsProblem(ctx context.Context, c *targetcluster.Cluster, b *v1alpha1.GlanceBackend) (string, error) {
	if b.Spec.S3 == nil {
		return "spec.s3 is missing", nil
	}
	keys := []client.ObjectKey{{Namespace: b.Namespace, Name: b.Spec.S3.CredentialsSecretRef.Name}}
	inputs := keys[0].Name
	ca := b.Spec.S3.CABundleSecretRef
	if ca != nil {
		keys = append(keys, client.ObjectKey{Namespace: b.Namespace, Name: ca.Name})
		inputs += "\x00" + ca.Name + "\x00" + ca.Key
	}
	id := "glancebackend/" + b.Namespace + "/" + b.Name
	msg, _, err := targetcluster.Derive(ctx, c, id, inputs, keys, func(reads []targetcluster.SecretRead) (string, error) {
		for _, read := range reads {
			switch {
			case apierrors.IsNotFound(read.Err):
				return fmt.Sprintf("Secret %q not found", read.Key.Name), nil
			case read.Err != nil:
				return "", fmt.Errorf("get Secret %s: %w", read.Key, read.Err)
			}
		}
		if missing := glance.S3CredentialsMissing(reads[0].Secret); missing != "" {
			return fmt.Sprintf("Secret %q lacks key %s", keys[0].Name, missing), nil
		}
		if ca != nil {
			if _, problem := glance.S3CABundle(reads[1].Secret, ca); problem != "" {
				return fmt.Sprintf("CA bundle Secret %q %s", ca.Name, problem), nil
			}
		}
		return "", nil
	})
	return msg, err
}

// reconcileProjection checks that the parent's Deployment mounts a backends
// Secret whose backends.conf holds this store's section.
func reconcileProjection(ctx context.Context, b *v1alpha1.GlanceBackend, p *pass) (ctrl.Result, error) {
	waiting := func(reason, msg string) (ctrl.Result, error) {
		pipeline.SetCondition(b, v1alpha1.ConditionConfigProjected, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{RequeueAfter: PollInterval}, nil
	}
	if p.parent == nil || p.cluster == nil {
		return waiting(p.waiting, p.waitingMsg)
	}
	var d appsv1.Deployment
	err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: p.parent.Name}, &d)
	if apierrors.IsNotFound(err) {
		return waiting(v1alpha1.ReasonWaitingForProjection, fmt.Sprintf("the Deployment of Glance %q does not exist yet", p.parent.Name))
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get Deployment %s: %w", p.parent.Name, err)
	}
	_, secretName := render.MountedNames(d.Spec.Template.Spec)
	if secretName == "" {
		return waiting(v1alpha1.ReasonWaitingForProjection, fmt.Sprintf("the Deployment of Glance %q mounts no backends Secret yet", p.parent.Name))
	}
	mounted, found, err := glance.ReadBackendsSecret(ctx, p.cluster, client.ObjectKey{Namespace: b.Namespace, Name: secretName})
	if err != nil {
		return ctrl.Result{}, err
	}
	if !found {
		return waiting(v1alpha1.ReasonWaitingForProjection, fmt.Sprintf("backends Secret %q not found", secretName))
	}
	if !slices.Contains(mounted.Sections, b.Name) {
		return waiting(v1alpha1.ReasonWaitingForProjection, fmt.Sprintf("the mounted backends Secret %q has no [%s] section yet", secretName, b.Name))
	}
	pipeline.SetCondition(b, v1alpha1.ConditionConfigProjected, metav1.ConditionTrue, v1alpha1.ReasonConfigProjected,
		fmt.Sprintf("the Deployment of Glance %q mounts backends Secret %q with this store", p.parent.Name, secretName))
	return ctrl.Result{}, nil
}
