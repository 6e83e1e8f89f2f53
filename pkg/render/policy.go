package render

import (
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// PolicyYAML renders policy.yaml: the rules read from
// policyOverrides.configMapRef (fromConfigMap) with the spec's rules merged
// over them, keys sorted. An empty check string is oslo.policy's "always
// allow" and is kept: the CRD refuses it in spec rules, but a ConfigMap may
// mean it.
func PolicyYAML(s *v1alpha1.GlanceSpec, fromConfigMap map[string]string) (string, error) {
	rules := make(map[string]string, len(fromConfigMap))
	for k, v := range fromConfigMap {
		rules[k] = v
	}
	if s.PolicyOverrides != nil {
		for k, v := range s.PolicyOverrides.Rules {
			rules[k] = string(v)
		}
	}
	// sigs.k8s.io/yaml sorts map keys and quotes every string that YAML 1.1
	// (PyYAML, which oslo.policy uses) would read as something else.
	out, err := yaml.Marshal(rules)
	if err != nil {
		return "", err
	}
	return string(out), nil
}
