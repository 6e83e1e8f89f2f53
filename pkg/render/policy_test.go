package render

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

func TestPolicyYAML(t *testing.T) {
	tests := []struct {
		name          string
		rules         map[string]v1alpha1.PolicyRule
		fromConfigMap map[string]string
		want          string
	}{
		{"spec rules only", map[string]v1alpha1.PolicyRule{"b": "role:admin", "a": "role:reader"}, nil, "a: role:reader\nb: role:admin\n"},
		{"config map only", nil, map[string]string{"x": "rule:admin_only"}, "x: rule:admin_only\n"},
		{"spec wins", map[string]v1alpha1.PolicyRule{"a": "role:admin"}, map[string]string{"a": "role:member", "c": ""}, "a: role:admin\nc: \"\"\n"},
		{"nothing", nil, nil, "{}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &minimalGlance().Spec
			s.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{Rules: tt.rules}
			got, err := PolicyYAML(s, tt.fromConfigMap)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// Check strings that YAML would read as something else, or as structure,
// come back as the same strings.
func TestPolicyYAMLQuotesAmbiguousStrings(t *testing.T) {
	rules := map[string]v1alpha1.PolicyRule{
		"yes": "no", "on": "off", "null": "~", "num": "1e3", "bang": "!", "at": "@x",
		"colon": "a: b", "hash": "# c", "dash": "- d", "brace": "{x}", "multi": "a\nb",
		"pct": "project_id:%(project_id)s", "quote": `"'`, "unicode": "rôle:ädmin",
	}
	s := &minimalGlance().Spec
	s.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{Rules: rules}
	text, err := PolicyYAML(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]v1alpha1.PolicyRule
	if err := yaml.Unmarshal([]byte(text), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rules) {
		t.Errorf("read back %v\nfrom\n%s", back, text)
	}
}
