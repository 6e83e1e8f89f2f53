package stack

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// The binaries run under the chart's identities, not cluster-admin: the
// stack applies the chart's ServiceAccounts and RBAC, mints a token for
// each ServiceAccount and hands each binary a kubeconfig carrying it, so a
// rule missing from the generated roles fails the suites as it would fail a
// Helm install.

// rbacKinds are the kinds of the chart's objects the stack applies: the
// identities and their permissions, nothing that runs.
var rbacKinds = []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// Components of the chart, by their app.kubernetes.io/component label.
const (
	managerComponent = "manager"
	webhookComponent = "webhook"
	componentLabel   = "app.kubernetes.io/component"
)

// tokenLifetime is what the stack asks of the TokenRequest API; the tokens
// are not refreshed, so a stack outliving them loses its binaries' access.
const tokenLifetime = 24 * time.Hour

// chartIdentities is what the stack takes from the rendered chart.
type chartIdentities struct {
	// rbac are the chart's ServiceAccount, ClusterRole, ClusterRoleBinding,
	// Role and RoleBinding objects, in the chart's order.
	rbac []*unstructured.Unstructured
	// manager and webhook are the ServiceAccounts the chart's Deployments
	// run as.
	manager, webhook types.NamespacedName
}

// renderChartIdentities renders the chart with its default values in the
// operator's namespace and picks out the RBAC objects and the
// ServiceAccounts of the manager's and the webhook's Deployments.
func renderChartIdentities() (*chartIdentities, error) {
	rendered, err := chart.Render(nil, chart.Options{Namespace: OperatorNamespace})
	if err != nil {
		return nil, fmt.Errorf("render the chart: %w", err)
	}
	ids := &chartIdentities{}
	for _, kind := range rbacKinds {
		ids.rbac = append(ids.rbac, rendered.Select(kind)...)
	}
	if ids.manager, err = deploymentServiceAccount(rendered, managerComponent); err != nil {
		return nil, err
	}
	if ids.webhook, err = deploymentServiceAccount(rendered, webhookComponent); err != nil {
		return nil, err
	}
	return ids, nil
}

// deploymentServiceAccount returns the spec.template.spec.serviceAccountName
// of the chart's one Deployment of the component, checked to be a
// ServiceAccount the chart renders.
func deploymentServiceAccount(rendered *chart.Rendered, component string) (types.NamespacedName, error) {
	var deployments []*unstructured.Unstructured
	for _, d := range rendered.Select("Deployment") {
		if d.GetLabels()[componentLabel] == component {
			deployments = append(deployments, d)
		}
	}
	if len(deployments) != 1 {
		return types.NamespacedName{}, fmt.Errorf("the chart renders %d Deployments with %s=%s, want 1", len(deployments), componentLabel, component)
	}
	d := deployments[0]
	name, _, err := unstructured.NestedString(d.Object, "spec", "template", "spec", "serviceAccountName")
	if err != nil || name == "" {
		return types.NamespacedName{}, fmt.Errorf("the chart's Deployment %s names no spec.template.spec.serviceAccountName (%v)", d.GetName(), err)
	}
	sa := rendered.Get("ServiceAccount", name)
	if sa == nil || sa.GetNamespace() != d.GetNamespace() {
		return types.NamespacedName{}, fmt.Errorf("the chart's Deployment %s runs as ServiceAccount %s/%s, which the chart does not render", d.GetName(), d.GetNamespace(), name)
	}
	return types.NamespacedName{Namespace: d.GetNamespace(), Name: name}, nil
}

// ServiceAccountUser is the user name a ServiceAccount's token
// authenticates as: system:serviceaccount:<namespace>:<name>.
func ServiceAccountUser(sa types.NamespacedName) string {
	return serviceaccount.MakeUsername(sa.Namespace, sa.Name)
}

// applyIdentities server-side applies the chart's RBAC objects with the
// admin client when apply is set (idempotent on a restarted stack; a Helm
// install has them already), waits until the API server authorizes what
// they grant, and writes a kubeconfig for each binary that authenticates as
// its ServiceAccount.
func (s *Stack) applyIdentities(ctx context.Context, ids *chartIdentities, cl client.Client, apply bool) error {
	if apply {
		for _, obj := range ids.rbac {
			if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner(controlplane.FieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("apply the chart's %s %s: %w", obj.GetKind(), objectName(obj), err)
			}
		}
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	if err := s.waitAuthorized(ctx, cs, ids.rbac); err != nil {
		return err
	}
	s.ManagerServiceAccount, s.WebhookServiceAccount = ids.manager, ids.webhook
	s.ManagerKubeconfig = filepath.Join(s.Dir, "glance-operator.kubeconfig")
	s.WebhookKubeconfig = filepath.Join(s.Dir, "glance-webhook.kubeconfig")
	for _, id := range []struct {
		sa         types.NamespacedName
		kubeconfig string
	}{{ids.manager, s.ManagerKubeconfig}, {ids.webhook, s.WebhookKubeconfig}} {
		token, err := serviceAccountToken(ctx, cs, id.sa)
		if err != nil {
			return err
		}
		// The admin config without its client certificate: same server
		// and CA, the ServiceAccount's token as the only credential.
		cfg := rest.AnonymousClientConfig(s.Config)
		cfg.Host = s.BinariesServer()
		cfg.BearerToken = token
		if err := controlplane.WriteKubeconfig(cfg, id.kubeconfig); err != nil {
			return fmt.Errorf("write the kubeconfig of %s: %w", ServiceAccountUser(id.sa), err)
		}
	}
	return nil
}

// serviceAccountToken mints a token for sa through the TokenRequest API and
// checks that the API server granted the whole lifetime asked for.
func serviceAccountToken(ctx context.Context, cs kubernetes.Interface, sa types.NamespacedName) (string, error) {
	asked := time.Now()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second)),
	}}
	granted, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token for %s: %w", ServiceAccountUser(sa), err)
	}
	// An API server capping the lifetime (--service-account-max-token-expiration)
	// would let the binaries' credentials lapse mid-run: say so up front.
	if expiry := granted.Status.ExpirationTimestamp.Time; expiry.Before(asked.Add(tokenLifetime - time.Minute)) {
		return "", fmt.Errorf("the API server granted the token of %s until %s, %s from now; the stack asked for %s",
			ServiceAccountUser(sa), expiry.Format(time.RFC3339), time.Until(expiry).Round(time.Second), tokenLifetime)
	}
	if granted.Status.Token == "" {
		return "", fmt.Errorf("the TokenRequest for %s came back without a token", ServiceAccountUser(sa))
	}
	return granted.Status.Token, nil
}

// waitAuthorized waits until the API server's RBAC authorizer, which learns
// of roles and bindings through its own watches, allows each subject of
// each applied binding the first rule of the bound role: a binary started
// earlier would log a denial the suites count as a missing permission.
func (s *Stack) waitAuthorized(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	roles := map[string]rbacv1.ClusterRole{} // by kind/namespace/name; a Role's rules carried as a ClusterRole's
	var reviews []authorizationv1.SubjectAccessReviewSpec
	var bindings []rbacv1.RoleBinding // ClusterRoleBindings carried with an empty namespace
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ClusterRole", "Role":
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
				return fmt.Errorf("decode the chart's %s %s: %w", obj.GetKind(), objectName(obj), err)
			}
			roles[obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName()] = role
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
				return fmt.Errorf("decode the chart's %s %s: %w", obj.GetKind(), objectName(obj), err)
			}
			bindings = append(bindings, b)
		}
	}
	for _, b := range bindings {
		roleNamespace := b.Namespace
		if b.RoleRef.Kind == "ClusterRole" {
			roleNamespace = ""
		}
		role, ok := roles[b.RoleRef.Kind+"/"+roleNamespace+"/"+b.RoleRef.Name]
		if !ok || len(role.Rules) == 0 {
			continue // a role the chart does not render, or an aggregated one
		}
		rule := role.Rules[0]
		if len(rule.Verbs) == 0 || len(rule.NonResourceURLs) == 0 && (len(rule.APIGroups) == 0 || len(rule.Resources) == 0) {
			return fmt.Errorf("the chart's %s %s starts with an incomplete rule %+v", b.RoleRef.Kind, b.RoleRef.Name, rule)
		}
		for _, subject := range b.Subjects {
			if subject.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			spec := authorizationv1.SubjectAccessReviewSpec{User: serviceaccount.MakeUsername(subject.Namespace, subject.Name)}
			spec.Groups = serviceaccount.MakeGroupNames(subject.Namespace)
			if len(rule.NonResourceURLs) > 0 {
				spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: rule.NonResourceURLs[0], Verb: rule.Verbs[0]}
			} else {
				attrs := &authorizationv1.ResourceAttributes{Namespace: b.Namespace, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0]}
				if len(rule.ResourceNames) > 0 {
					attrs.Name = rule.ResourceNames[0]
				}
				spec.ResourceAttributes = attrs
			}
			reviews = append(reviews, spec)
		}
	}
	return s.poll(ctx, "the API server to authorize the chart's RBAC", 30*time.Second, func(ctx context.Context) (bool, error) {
		for _, spec := range reviews {
			review, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			if !review.Status.Allowed {
				return false, fmt.Errorf("%s not yet allowed %s: %s", spec.User, describeAttributes(spec), review.Status.Reason)
			}
		}
		return true, nil
	})
}

func describeAttributes(spec authorizationv1.SubjectAccessReviewSpec) string {
	if a := spec.NonResourceAttributes; a != nil {
		return a.Verb + " " + a.Path
	}
	a := spec.ResourceAttributes
	return fmt.Sprintf("%s %s.%s in namespace %q", a.Verb, a.Resource, a.Group, a.Namespace)
}

func objectName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// rbacDenialMarkers are what an API server's 403 leaves in a client's log:
// the status message (`pods is forbidden: User "…" cannot list …`, or
// `forbidden: User "…" cannot get path …` for a path) and, in structured
// logs, the status reason Forbidden. A bare "Forbidden" is no marker: the
// webhook logs its own verdicts' causes, such as FieldValueForbidden.
var rbacDenialMarkers = []string{"is forbidden", `forbidden: User "`, "reason=Forbidden", `"reason":"Forbidden"`, "403 Forbidden"}

// RBACDenials returns the lines of the manager's and the webhook's logs
// that carry an API server denial, each prefixed with its file and line
// number: a denied call means the chart's generated roles lack a rule the
// code needs. Call it after Stop for the complete logs. The webhook logs a
// failed lookup as an error verdict without the API server's message, so
// its denials show here only once it logs them; the stories see them as
// Internal errors.
func (s *Stack) RBACDenials() ([]string, error) {
	var found []string
	for _, path := range s.binaryLogs {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, marker := range rbacDenialMarkers {
				if strings.Contains(line, marker) {
					found = append(found, fmt.Sprintf("%s:%d: %s", filepath.Base(path), n, line))
					break
				}
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return found, nil
}

// ManagerForbiddenRequests returns, by HTTP method, how many of
// glance-operator's API requests the API server at server (the stack's own
// when empty; a target's Config.Host) answered 403, read from the client-go
// counter rest_client_requests_total on its /metrics: a denial the code
// handles without logging it still counts. Call it before Stop.
func (s *Stack) ManagerForbiddenRequests(ctx context.Context, server string) (map[string]float64, error) {
	if server == "" {
		server = s.BinariesServer()
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, err
	}
	families, err := s.ManagerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	const name = "rest_client_requests_total"
	family, ok := families[name]
	if !ok {
		// Registered by controller-runtime at start: its absence would make
		// this check pass vacuously.
		return nil, fmt.Errorf("%s serves no %s", s.ManagerMetricsURL, name)
	}
	forbidden := map[string]float64{}
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["code"] == strconv.Itoa(http.StatusForbidden) && labels["host"] == u.Host {
			forbidden[labels["method"]] += m.GetCounter().GetValue()
		}
	}
	return forbidden, nil
}

// ManagerMetrics scrapes glance-operator's /metrics.
func (s *Stack) ManagerMetrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	return Scrape(ctx, s.ManagerMetricsURL)
}

// Scrape reads a Prometheus text endpoint.
func Scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	return families, nil
}
