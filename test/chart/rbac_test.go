package chart

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// generatedRoles reads files/rbac/<component>/role.yaml: the ClusterRole and
// the Role controller-gen makes from the component's markers.
func generatedRoles(t *testing.T, component string) (cluster *rbacv1.ClusterRole, namespaced *rbacv1.Role) {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.ReadObjects(filepath.Join(dir, "files", "rbac", component, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			cluster = decode[rbacv1.ClusterRole](t, o)
		case "Role":
			namespaced = decode[rbacv1.Role](t, o)
		}
	}
	if cluster == nil {
		t.Fatalf("files/rbac/%s/role.yaml has no ClusterRole; run `make manifests`", component)
	}
	return cluster, namespaced
}

// grants flattens rules into "group/resource:verb" entries, so that rule
// sets compare whatever way they are grouped.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func TestNoWildcardRules(t *testing.T) {
	check := func(where string, rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			for _, field := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames, r.NonResourceURLs} {
				if slices.Contains(field, "*") {
					t.Errorf("%s has a wildcard rule: %+v", where, r)
				}
			}
			if len(r.NonResourceURLs) > 0 {
				t.Errorf("%s grants non-resource URLs: %+v", where, r)
			}
		}
	}
	for _, component := range []string{"manager", "webhook"} {
		cluster, namespaced := generatedRoles(t, component)
		check("files/rbac/"+component+" ClusterRole", cluster.Rules)
		if namespaced != nil {
			check("files/rbac/"+component+" Role", namespaced.Rules)
		}
	}
	for _, m := range Matrix {
		name := m.Name
		r := render(t, name)
		for _, o := range r.Select("ClusterRole") {
			check(name+": ClusterRole "+o.GetName(), decode[rbacv1.ClusterRole](t, o).Rules)
		}
		for _, o := range r.Select("Role") {
			check(name+": Role "+o.GetNamespace()+"/"+o.GetName(), decode[rbacv1.Role](t, o).Rules)
		}
	}
}

func TestClusterWideRBACIsTheGenerated(t *testing.T) {
	r := render(t, "defaults")
	managerRules, leaderRules := generatedRoles(t, "manager")
	webhookRules, _ := generatedRoles(t, "webhook")

	if got, want := grants(decode[rbacv1.ClusterRole](t, mustGet(t, r, "ClusterRole", managerName)).Rules), grants(managerRules.Rules); !slices.Equal(got, want) {
		t.Errorf("manager ClusterRole grants\n %v\nthe markers generate\n %v", got, want)
	}
	leader := decode[rbacv1.Role](t, mustGet(t, r, "Role", managerName+"-leader-election"))
	if leader.Namespace != Namespace {
		t.Errorf("leader election Role is in %q, want the release namespace %q", leader.Namespace, Namespace)
	}
	if got, want := grants(leader.Rules), grants(leaderRules.Rules); !slices.Equal(got, want) {
		t.Errorf("leader election Role grants %v, the markers generate %v", got, want)
	}
	for _, want := range []string{"coordination.k8s.io/leases:update", "/events:create"} {
		if !slices.Contains(grants(leader.Rules), want) {
			t.Errorf("leader election Role lacks %s", want)
		}
	}
	// The webhook reads two things and nothing else.
	wantWebhook := []string{"glance.openstack.c5c3.io/glancebackends:list", "glance.openstack.c5c3.io/glancebackends:watch", "scheduling.k8s.io/priorityclasses:get"}
	if got := grants(decode[rbacv1.ClusterRole](t, mustGet(t, r, "ClusterRole", webhookName)).Rules); !slices.Equal(got, wantWebhook) || !slices.Equal(grants(webhookRules.Rules), wantWebhook) {
		t.Errorf("webhook ClusterRole grants %v (generated %v), want exactly %v", got, grants(webhookRules.Rules), wantWebhook)
	}
	for _, component := range []string{managerName, webhookName} {
		checkBinding(t, decode[rbacv1.ClusterRoleBinding](t, mustGet(t, r, "ClusterRoleBinding", component)).RoleRef, decode[rbacv1.ClusterRoleBinding](t, mustGet(t, r, "ClusterRoleBinding", component)).Subjects, "ClusterRole", component, component)
	}
	lb := decode[rbacv1.RoleBinding](t, mustGet(t, r, "RoleBinding", managerName+"-leader-election"))
	checkBinding(t, lb.RoleRef, lb.Subjects, "Role", managerName+"-leader-election", managerName)
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, role, serviceAccount string) {
	t.Helper()
	if ref.Kind != kind || ref.Name != role {
		t.Errorf("binding refers to %s %s, want %s %s", ref.Kind, ref.Name, kind, role)
	}
	if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Name != serviceAccount || subjects[0].Namespace != Namespace {
		t.Errorf("binding of %s binds %+v, want only ServiceAccount %s/%s", role, subjects, Namespace, serviceAccount)
	}
}

func TestNamespacedInstallUsesRoles(t *testing.T) {
	r := render(t, "namespaced")
	watched := []string{"openstack", "tenant-b"}
	for _, c := range []struct{ component, name string }{{"manager", managerName}, {"webhook", webhookName}} {
		generated, _ := generatedRoles(t, c.component)
		all := grants(generated.Rules)
		var clusterScoped []string
		if o := r.Get("ClusterRole", c.name); o != nil {
			clusterScoped = grants(decode[rbacv1.ClusterRole](t, o).Rules)
		}
		for _, ns := range watched {
			var role *rbacv1.Role
			for _, o := range r.Select("Role") {
				if o.GetName() == c.name && o.GetNamespace() == ns {
					role = decode[rbacv1.Role](t, o)
				}
			}
			if role == nil {
				t.Errorf("%s: no Role in watched namespace %s", c.component, ns)
				continue
			}
			// The Role and the ClusterRole together grant exactly the
			// generated rules.
			union := append(grants(role.Rules), clusterScoped...)
			sort.Strings(union)
			if !slices.Equal(slices.Compact(union), all) {
				t.Errorf("%s in %s: Role %v plus ClusterRole %v, want the generated %v", c.component, ns, grants(role.Rules), clusterScoped, all)
			}
			var bound bool
			for _, o := range r.Select("RoleBinding") {
				if o.GetName() == c.name && o.GetNamespace() == ns {
					b := decode[rbacv1.RoleBinding](t, o)
					checkBinding(t, b.RoleRef, b.Subjects, "Role", c.name, c.name)
					bound = true
				}
			}
			if !bound {
				t.Errorf("%s: no RoleBinding in %s", c.component, ns)
			}
		}
	}
	manager := decode[rbacv1.ClusterRole](t, mustGet(t, r, "ClusterRole", managerName))
	if got := grants(manager.Rules); !slices.Equal(got, []string{"external-secrets.io/clustersecretstores:get", "external-secrets.io/clustersecretstores:list", "external-secrets.io/clustersecretstores:watch"}) {
		t.Errorf("namespaced manager ClusterRole grants %v, want only the ClusterSecretStores", got)
	}
}

func TestAggregatedRoles(t *testing.T) {
	r := render(t, "defaults")
	for _, c := range []struct {
		name      string
		aggregate []string
		verbs     []string
	}{
		{"glance-operator-view", []string{"view", "edit", "admin"}, []string{"get", "list", "watch"}},
		{"glance-operator-edit", []string{"edit", "admin"}, []string{"create", "update", "patch", "delete", "deletecollection"}},
	} {
		role := decode[rbacv1.ClusterRole](t, mustGet(t, r, "ClusterRole", c.name))
		for _, to := range c.aggregate {
			if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] != "true" {
				t.Errorf("%s does not aggregate to %s", c.name, to)
			}
		}
		for _, kind := range []string{"glances", "glancebackends"} {
			for _, v := range c.verbs {
				if !slices.Contains(grants(role.Rules), "glance.openstack.c5c3.io/"+kind+":"+v) {
					t.Errorf("%s lacks %s on %s", c.name, v, kind)
				}
			}
		}
	}
	if slices.Contains(grants(decode[rbacv1.ClusterRole](t, mustGet(t, r, "ClusterRole", "glance-operator-view")).Rules), "glance.openstack.c5c3.io/glances:update") {
		t.Error("the view role may update Glances")
	}
}

// TestNamespacedInstallReadsTheClusterKubeconfigs: with watchNamespace set,
// the Roles of the watched namespaces do not cover the clusters namespace;
// a Role there lets the target cluster registry read the kubeconfig Secrets.
func TestNamespacedInstallReadsTheClusterKubeconfigs(t *testing.T) {
	r := render(t, "namespaced")
	name := managerName + "-target-clusters"
	var role *rbacv1.Role
	for _, o := range r.Select("Role") {
		if o.GetName() == name && o.GetNamespace() == Namespace {
			role = decode[rbacv1.Role](t, o)
		}
	}
	if role == nil {
		t.Fatalf("no Role %s in the clusters namespace %s", name, Namespace)
	}
	if got, want := grants(role.Rules), []string{"/secrets:get", "/secrets:list", "/secrets:watch"}; !slices.Equal(got, want) {
		t.Errorf("Role %s grants %v, want %v", name, got, want)
	}
	var bound bool
	for _, o := range r.Select("RoleBinding") {
		if o.GetName() == name && o.GetNamespace() == Namespace {
			b := decode[rbacv1.RoleBinding](t, o)
			checkBinding(t, b.RoleRef, b.Subjects, "Role", name, managerName)
			bound = true
		}
	}
	if !bound {
		t.Errorf("no RoleBinding %s", name)
	}
	if r := render(t, "defaults"); r.Get("Role", name) != nil {
		t.Errorf("a cluster-wide install renders %s too; its ClusterRole already reads Secrets", name)
	}
}

// TestTargetClusterRBAC: the bundle for a target cluster grants what the
// manager does there, its generated rules without its own API group (the
// CRs stay on the management cluster), plus the service proxy of the health
// probe; the default install does not render it.
func TestTargetClusterRBAC(t *testing.T) {
	name := managerName + "-target-cluster"
	if render(t, "defaults").Get("ClusterRole", name) != nil {
		t.Errorf("the default install renders ClusterRole %s", name)
	}
	role := decode[rbacv1.ClusterRole](t, mustGet(t, render(t, "target-cluster-rbac"), "ClusterRole", name))
	generated, _ := generatedRoles(t, "manager")
	var want []string
	for _, g := range grants(generated.Rules) {
		if !strings.HasPrefix(g, "glance.openstack.c5c3.io/") {
			want = append(want, g)
		}
	}
	want = append(want, "/services/proxy:get")
	sort.Strings(want)
	got := grants(role.Rules)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("ClusterRole %s grants %v, want %v", name, got, want)
	}
}

// TestServiceAccountNames: with its ServiceAccounts named by values, the
// chart binds every role to them and to no other account.
func TestServiceAccountNames(t *testing.T) {
	r := render(t, "service-accounts")
	accounts := map[string]bool{"platform-glance-operator": true, "glance-admission": true}
	bound := map[string]bool{}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range r.Select(kind) {
			for _, s := range decode[rbacv1.RoleBinding](t, b).Subjects {
				if s.Kind != "ServiceAccount" {
					continue
				}
				bound[s.Name] = true
				if !accounts[s.Name] {
					t.Errorf("%s %s binds ServiceAccount %s", kind, b.GetName(), s.Name)
				}
			}
		}
	}
	if len(bound) != 2 {
		t.Errorf("the bindings bind %v, want both named accounts", bound)
	}
	sa := mustGet(t, r, "ServiceAccount", "glance-admission")
	if sa.GetAnnotations()["eks.amazonaws.com/role-arn"] == "" {
		t.Errorf("the webhook's ServiceAccount lacks its annotations: %v", sa.GetAnnotations())
	}
}
