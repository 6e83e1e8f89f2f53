package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/stack"
)

// access is one request a binary's identity asks the API server about
// (SelfSubjectAccessReview), and whether the chart's roles must allow it.
type access struct {
	verb, group, resource, subresource, namespace string
	allowed                                       bool
}

func (a access) String() string {
	res := a.resource
	if a.group != "" {
		res += "." + a.group
	}
	if a.subresource != "" {
		res += "/" + a.subresource
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, res, where)
}

const glanceGroup = "glance.openstack.c5c3.io"

// binaryIdentity is a binary, the ServiceAccount the stack runs it as, and
// what its roles must and must not allow. The allowed rows keep the denied
// ones honest: an identity that may do nothing would pass those alone.
type binaryIdentity struct {
	binary     string
	sa         types.NamespacedName
	kubeconfig string
	accesses   []access
	// deniedCall is a real request the identity must be refused;
	// allowedCall one it must be granted.
	deniedCall, allowedCall func(context.Context, client.Client) error
}

func binaryIdentities() []binaryIdentity {
	return []binaryIdentity{{
		binary: "glance-operator", sa: stk.ManagerServiceAccount, kubeconfig: stk.ManagerKubeconfig,
		accesses: []access{
			{verb: "update", group: glanceGroup, resource: "glances", subresource: "status", namespace: "openstack", allowed: true},
			{verb: "create", group: "apps", resource: "deployments", namespace: "openstack", allowed: true},
			{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: stack.OperatorNamespace, allowed: true},
			// It reads the API pods, for those the kubelet evicted for
			// their image cache (the cache scopes that to its own by
			// label; RBAC cannot); it never changes a pod, and nodes are
			// none of its business.
			{verb: "watch", resource: "pods", namespace: "openstack", allowed: true},
			{verb: "delete", resource: "pods", namespace: "openstack"},
			{verb: "create", resource: "pods", namespace: "kube-system"},
			{verb: "delete", resource: "nodes"},
			// The user's Glance is the user's to delete.
			{verb: "delete", group: glanceGroup, resource: "glances", namespace: "openstack"},
			// Leader election's Role is confined to the operator's namespace.
			{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
			{verb: "create", resource: "events", namespace: "default"},
			{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		},
		deniedCall: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.NodeList{})
		},
		allowedCall: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &v1alpha1.GlanceList{})
		},
	}, {
		binary: "glance-webhook", sa: stk.WebhookServiceAccount, kubeconfig: stk.WebhookKubeconfig,
		accesses: []access{
			{verb: "list", group: glanceGroup, resource: "glancebackends", namespace: "openstack", allowed: true},
			{verb: "watch", group: glanceGroup, resource: "glancebackends", namespace: "openstack", allowed: true},
			{verb: "get", group: "scheduling.k8s.io", resource: "priorityclasses", allowed: true},
			// The webhook reads no Secrets at all.
			{verb: "list", resource: "secrets"},
			{verb: "get", resource: "secrets", namespace: stack.OperatorNamespace},
			// It watches and lists the backends for the one-default
			// rule, and gets nothing.
			{verb: "get", group: glanceGroup, resource: "glancebackends", namespace: "openstack"},
			{verb: "list", group: "scheduling.k8s.io", resource: "priorityclasses"},
			{verb: "update", group: glanceGroup, resource: "glances", namespace: "openstack"},
		},
		deniedCall: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(stack.OperatorNamespace))
		},
		allowedCall: func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &v1alpha1.GlanceBackendList{}, client.InNamespace("openstack"))
		},
	}}
}

// TestBinariesRunAsTheChartServiceAccounts proves the least privilege of
// the binaries: each one's kubeconfig authenticates as its chart
// ServiceAccount, not as an admin, and the generated roles deny what they
// do not grant.
func TestBinariesRunAsTheChartServiceAccounts(t *testing.T) {
	t.Parallel()
	ids := binaryIdentities()
	if ids[0].sa == ids[1].sa {
		t.Fatalf("glance-operator and glance-webhook share the ServiceAccount %s; each should have its own", ids[0].sa)
	}
	for _, id := range ids {
		t.Run(id.binary, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if id.sa.Namespace != stack.OperatorNamespace || id.sa.Name == "" {
				t.Fatalf("%s runs as ServiceAccount %q, want one in %s", id.binary, id.sa, stack.OperatorNamespace)
			}
			if err := cl.Get(ctx, client.ObjectKey(id.sa), &corev1.ServiceAccount{}); err != nil {
				t.Fatalf("the ServiceAccount %s of %s: %v", id.sa, id.binary, err)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", id.kubeconfig)
			if err != nil {
				t.Fatalf("load the kubeconfig of %s: %v", id.binary, err)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}

			review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("SelfSubjectReview with the kubeconfig of %s: %v", id.binary, err)
			}
			user := review.Status.UserInfo
			if want := fmt.Sprintf("system:serviceaccount:%s:%s", stack.OperatorNamespace, id.sa.Name); user.Username != want {
				t.Errorf("the kubeconfig of %s authenticates as %q, want %q", id.binary, user.Username, want)
			}
			if !slices.Contains(user.Groups, "system:serviceaccounts") || slices.Contains(user.Groups, "system:masters") {
				t.Errorf("the kubeconfig of %s authenticates in the groups %q, want system:serviceaccounts and not system:masters", id.binary, user.Groups)
			}

			for _, a := range id.accesses {
				ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
					},
				}}
				got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("SelfSubjectAccessReview %s as %s: %v", a, id.binary, err)
				}
				if got.Status.Allowed != a.allowed {
					t.Errorf("%s may %s: allowed=%t, want %t (%s)", id.binary, a, got.Status.Allowed, a.allowed, got.Status.Reason)
				}
			}

			// The same verdicts on real requests.
			c, err := client.New(cfg, client.Options{Scheme: cl.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			if err := id.allowedCall(ctx, c); err != nil {
				t.Errorf("%s: a request its role grants failed: %v", id.binary, err)
			}
			if err := id.deniedCall(ctx, c); !apierrors.IsForbidden(err) {
				t.Errorf("%s: a request outside its role got %v, want Forbidden", id.binary, err)
			}
		})
	}
}
