package render

import (
	"testing"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// gatewayGlance is minimalGlance exposed through a Gateway with every
// gateway field set.
func gatewayGlance() *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.Gateway = &v1alpha1.GatewaySpec{
		ParentRef: v1alpha1.GatewayParentReference{Name: "public", Namespace: "gateways", SectionName: "https"},
		Hostname:  "image.example.com",
		Path:      "/image",
		Annotations: map[string]string{
			"external-dns.alpha.kubernetes.io/ttl": "60",
			"example.com/owner":                    "platform",
		},
	}
	return g
}

func TestHTTPRoute(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(g *v1alpha1.Glance)
		wantErr string
		check   func(t *testing.T, r *gatewayv1.HTTPRoute)
	}{
		{
			name: "every gateway field",
			check: func(t *testing.T, r *gatewayv1.HTTPRoute) {
				if r.Name != "glance" || r.Namespace != "openstack" {
					t.Errorf("object = %s/%s, want openstack/glance", r.Namespace, r.Name)
				}
				if r.Labels[LabelComponent] != ComponentRoute || r.Labels[LabelInstance] != "glance" || r.Labels[LabelManagedBy] != ManagedBy {
					t.Errorf("labels = %v", r.Labels)
				}
				if r.Annotations["example.com/owner"] != "platform" || len(r.Annotations) != 2 {
					t.Errorf("annotations = %v", r.Annotations)
				}
				p := r.Spec.ParentRefs
				if len(p) != 1 || p[0].Name != "public" || ptr.Deref(p[0].Namespace, "") != "gateways" || ptr.Deref(p[0].SectionName, "") != "https" {
					t.Errorf("parentRefs = %+v", p)
				}
				if len(r.Spec.Hostnames) != 1 || r.Spec.Hostnames[0] != "image.example.com" {
					t.Errorf("hostnames = %v", r.Spec.Hostnames)
				}
				if len(r.Spec.Rules) != 1 {
					t.Fatalf("rules = %+v, want one", r.Spec.Rules)
				}
				rule := r.Spec.Rules[0]
				if len(rule.Matches) != 1 || *rule.Matches[0].Path.Type != gatewayv1.PathMatchPathPrefix || *rule.Matches[0].Path.Value != "/image" {
					t.Errorf("matches = %+v", rule.Matches)
				}
				if b := rule.BackendRefs; len(b) != 1 || b[0].Name != "glance" || *b[0].Kind != "Service" || *b[0].Port != v1alpha1.APIPort {
					t.Errorf("backendRefs = %+v", b)
				}
				if rule.Timeouts == nil || ptr.Deref(rule.Timeouts.Request, "") != "4h" || rule.Timeouts.BackendRequest != nil {
					t.Errorf("timeouts = %+v, want request 4h only", rule.Timeouts)
				}
			},
		},
		{
			name: "path defaults to /, empty namespace and sectionName are omitted",
			mutate: func(g *v1alpha1.Glance) {
				g.Spec.Gateway.Path = ""
				g.Spec.Gateway.ParentRef = v1alpha1.GatewayParentReference{Name: "public"}
				g.Spec.Gateway.Annotations = nil
			},
			check: func(t *testing.T, r *gatewayv1.HTTPRoute) {
				if v := *r.Spec.Rules[0].Matches[0].Path.Value; v != v1alpha1.DefaultGatewayPath {
					t.Errorf("path = %q, want %q", v, v1alpha1.DefaultGatewayPath)
				}
				if p := r.Spec.ParentRefs[0]; p.Namespace != nil || p.SectionName != nil {
					t.Errorf("parentRef = %+v, want no namespace and no sectionName", p)
				}
				if r.Annotations != nil {
					t.Errorf("annotations = %v, want none", r.Annotations)
				}
			},
		},
		{
			name:   "wildcard hostname",
			mutate: func(g *v1alpha1.Glance) { g.Spec.Gateway.Hostname = "*.example.com" },
			check: func(t *testing.T, r *gatewayv1.HTTPRoute) {
				if r.Spec.Hostnames[0] != "*.example.com" {
					t.Errorf("hostnames = %v", r.Spec.Hostnames)
				}
			},
		},
		{name: "no gateway", mutate: func(g *v1alpha1.Glance) { g.Spec.Gateway = nil }, wantErr: "spec.gateway is not set"},
		{name: "no namespace", mutate: func(g *v1alpha1.Glance) { g.Namespace = "" }, wantErr: "namespace"},
		{name: "no parent name", mutate: func(g *v1alpha1.Glance) { g.Spec.Gateway.ParentRef.Name = "" }, wantErr: "spec.gateway.parentRef.name"},
		{name: "no hostname", mutate: func(g *v1alpha1.Glance) { g.Spec.Gateway.Hostname = "" }, wantErr: "spec.gateway.hostname"},
		{name: "hostname with a port", mutate: func(g *v1alpha1.Glance) { g.Spec.Gateway.Hostname = "image.example.com:443" }, wantErr: "spec.gateway.hostname"},
		{name: "relative path", mutate: func(g *v1alpha1.Glance) { g.Spec.Gateway.Path = "image" }, wantErr: "spec.gateway.path"},
		{name: "path with a space", mutate: func(g *v1alpha1.Glance) { g.Spec.Gateway.Path = "/my image" }, wantErr: "spec.gateway.path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := gatewayGlance()
			if c.mutate != nil {
				c.mutate(g)
			}
			r, err := HTTPRoute(g)
			if !renderedAsWanted(t, err, c.wantErr) {
				return
			}
			c.check(t, r)
		})
	}
}

func TestHTTPRouteDoesNotAliasSpec(t *testing.T) {
	g := gatewayGlance()
	r, err := HTTPRoute(g)
	if err != nil {
		t.Fatal(err)
	}
	r.Annotations["example.com/owner"] = "someone-else"
	if g.Spec.Gateway.Annotations["example.com/owner"] != "platform" {
		t.Error("changing the route's annotations changed spec.gateway.annotations")
	}
}

func TestHTTPRouteGolden(t *testing.T) {
	minimal := minimalGlance()
	minimal.Spec.Gateway = &v1alpha1.GatewaySpec{
		ParentRef: v1alpha1.GatewayParentReference{Name: "public"},
		Hostname:  "image.example.com",
	}
	for dir, g := range map[string]*v1alpha1.Glance{
		"gateway":         gatewayGlance(),
		"gateway-minimal": minimal,
	} {
		t.Run(dir, func(t *testing.T) {
			r, err := HTTPRoute(g)
			if err != nil {
				t.Fatal(err)
			}
			checkGoldenObject(t, dir, "httproute.yaml", r)
		})
	}
}
