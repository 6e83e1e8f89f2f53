package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/pkg/logging"
)

// The stand-ins play, in the stack's own process, the operators the product
// talks to, only as far as the product can tell:
//   - mariadb-operator: every MariaDB, Database, User and Grant turns Ready;
//   - External Secrets: every ClusterSecretStore and SecretStore turns
//     Ready (the Secrets themselves are created by whoever sets the scene);
//   - a Gateway controller: an HTTPRoute is Accepted by a parent Gateway
//     that exists, and not (NoMatchingParent) by one that does not.
// Their log is <dir>/logs/stand-ins.log.

// StandInGatewayController is the controllerName of the Gateway stand-in in
// an HTTPRoute's status.parents.
const StandInGatewayController = "stack.glance.c5c3.io/gateway-stand-in"

// readyKinds are the kinds a stand-in reports Ready, with the operator it
// stands in for.
var readyKinds = []struct {
	gvk      schema.GroupVersionKind
	operator string
}{
	{schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "MariaDB"}, "mariadb-operator"},
	{schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "Database"}, "mariadb-operator"},
	{schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "User"}, "mariadb-operator"},
	{schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "Grant"}, "mariadb-operator"},
	{schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ClusterSecretStore"}, "External Secrets"},
	{schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "SecretStore"}, "External Secrets"},
}

// startStandIns starts the stack's stand-ins (see above), logging to
// logDir/name.log.
func startStandIns(ctx context.Context, cfg *rest.Config, logDir, name string) (*StandInManager, error) {
	return StartStandInManager(ctx, cfg, logDir, name, func(mgr ctrl.Manager) error {
		for _, k := range readyKinds {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(k.gvk)
			err := ctrl.NewControllerManagedBy(mgr).
				Named("stand-in-" + k.gvk.Kind).
				For(obj).
				Complete(readyReporter{client: mgr.GetClient(), gvk: k.gvk, operator: k.operator})
			if err != nil {
				return err
			}
		}
		acceptor := routeAcceptor{client: mgr.GetClient()}
		return ctrl.NewControllerManagedBy(mgr).
			Named("stand-in-gateway").
			For(&gatewayv1.HTTPRoute{}).
			Watches(&gatewayv1.Gateway{}, handler.EnqueueRequestsFromMapFunc(acceptor.routesOf)).
			Complete(acceptor)
	})
}

// StandInManager is a controller-runtime manager in this process running
// stand-ins for operators the product talks to, its log in a file.
type StandInManager struct {
	cancel context.CancelFunc
	done   chan error
	log    *os.File
}

// StartStandInManager starts a manager with the controllers setup
// registers, its log in logDir/name.log, and waits for its caches. Its
// scheme knows the built-in kinds and the Gateway API's.
func StartStandInManager(ctx context.Context, cfg *rest.Config, logDir, name string, setup func(ctrl.Manager) error) (_ *StandInManager, err error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			logFile.Close()
		}
	}()
	log, err := logging.New(logFile, "text", "info")
	if err != nil {
		return nil, err
	}
	// The caches log through controller-runtime's global logger; the
	// stand-ins are the only controller-runtime manager of the process.
	ctrl.SetLogger(log)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := gatewayv1.Install(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The e2e suite and make run start one stack per process; the
		// names need not be unique beyond it.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := setup(mgr); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m := &StandInManager{cancel: cancel, done: make(chan error, 1), log: logFile}
	go func() { m.done <- mgr.Start(runCtx) }()
	syncCtx, syncDone := context.WithTimeout(ctx, time.Minute)
	defer syncDone()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return nil, errors.Join(fmt.Errorf("the caches of %s did not sync (see %s.log)", name, name), m.Stop())
	}
	return m, nil
}

// Stop stops the manager and closes its log.
func (m *StandInManager) Stop() error {
	m.cancel()
	var err error
	select {
	case err = <-m.done:
	case <-time.After(30 * time.Second):
		err = errors.New("the stand-ins did not stop within 30s")
	}
	return errors.Join(err, m.log.Close())
}

// readyReporter plays the operator of a kind that reports every object of it
// Ready at its current generation.
type readyReporter struct {
	client   client.Client
	gvk      schema.GroupVersionKind
	operator string
}

func (r readyReporter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.gvk)
	if err := r.client.Get(ctx, req.NamespacedName, u); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if u.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	changed, err := SetReady(u, "reported Ready by the stack's "+r.operator+" stand-in")
	if err != nil || !changed {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.client.Status().Update(ctx, u)
}

// SetReady sets an object's Ready condition True at its generation, with
// message, as the operator of its kind would; it reports whether the
// condition changed.
func SetReady(u *unstructured.Unstructured, message string) (bool, error) {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	others := make([]any, 0, len(conditions))
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			others = append(others, c)
			continue
		}
		if m["status"] == "True" && m["observedGeneration"] == u.GetGeneration() {
			return false, nil
		}
	}
	ready := map[string]any{
		"type": "Ready", "status": "True", "reason": "Ready",
		"message":            message,
		"observedGeneration": u.GetGeneration(),
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	return true, unstructured.SetNestedSlice(u.Object, append(others, ready), "status", "conditions")
}

// IsReady reports whether an object's Ready condition is True at its
// generation, as SetReady sets it.
func IsReady(u *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True" && m["observedGeneration"] == u.GetGeneration()
		}
	}
	return false
}

// routeAcceptor plays a Gateway controller: it reports, for each Gateway
// parent of an HTTPRoute, Accepted=True when that Gateway exists and
// Accepted=False with reason NoMatchingParent when it does not.
type routeAcceptor struct {
	client client.Client
}

func (r routeAcceptor) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	route := &gatewayv1.HTTPRoute{}
	if err := r.client.Get(ctx, req.NamespacedName, route); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if route.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	var parents, ours []gatewayv1.RouteParentStatus
	for _, ps := range route.Status.Parents {
		if ps.ControllerName == StandInGatewayController {
			ours = append(ours, ps)
		} else {
			parents = append(parents, ps)
		}
	}
	for _, ref := range route.Spec.ParentRefs {
		ns, ok := gatewayParent(route, ref)
		if !ok {
			continue
		}
		cond := metav1.Condition{Type: string(gatewayv1.RouteConditionAccepted), ObservedGeneration: route.Generation}
		err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(ref.Name)}, &gatewayv1.Gateway{})
		switch {
		case err == nil:
			cond.Status, cond.Reason = metav1.ConditionTrue, string(gatewayv1.RouteReasonAccepted)
			cond.Message = fmt.Sprintf("Gateway %s/%s exists", ns, ref.Name)
		case apierrors.IsNotFound(err):
			cond.Status, cond.Reason = metav1.ConditionFalse, string(gatewayv1.RouteReasonNoMatchingParent)
			cond.Message = fmt.Sprintf("no Gateway %s/%s", ns, ref.Name)
		default:
			return reconcile.Result{}, err
		}
		// Keep the transition time of an unchanged condition.
		var conditions []metav1.Condition
		for _, ps := range ours {
			if equality.Semantic.DeepEqual(ps.ParentRef, ref) {
				conditions = append(conditions, ps.Conditions...)
			}
		}
		meta.SetStatusCondition(&conditions, cond)
		parents = append(parents, gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: StandInGatewayController, Conditions: conditions})
	}
	if equality.Semantic.DeepEqual(parents, route.Status.Parents) {
		return reconcile.Result{}, nil
	}
	route.Status.Parents = parents
	return reconcile.Result{}, r.client.Status().Update(ctx, route)
}

// routesOf maps a Gateway to the HTTPRoutes naming it as a parent, so a
// Gateway coming or going re-judges them.
func (r routeAcceptor) routesOf(ctx context.Context, gw client.Object) []reconcile.Request {
	var routes gatewayv1.HTTPRouteList
	if err := r.client.List(ctx, &routes); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list HTTPRoutes")
		return nil
	}
	var reqs []reconcile.Request
	for i := range routes.Items {
		route := &routes.Items[i]
		for _, ref := range route.Spec.ParentRefs {
			if ns, ok := gatewayParent(route, ref); ok && ns == gw.GetNamespace() && string(ref.Name) == gw.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(route)})
				break
			}
		}
	}
	return reqs
}

// gatewayParent returns the namespace of a parent reference to a Gateway,
// and false for a reference to anything else.
func gatewayParent(route *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference) (string, bool) {
	if (ref.Group != nil && *ref.Group != gatewayv1.GroupName) || (ref.Kind != nil && *ref.Kind != "Gateway") {
		return "", false
	}
	if ref.Namespace != nil {
		return string(*ref.Namespace), true
	}
	return route.Namespace, true
}
