package glance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// PolicyConfigMapKey is the key of the rules in a policyOverrides ConfigMap.
const PolicyConfigMapKey = "policy.yaml"

// reconcileConfig renders the config files into an immutable,
// content-addressed ConfigMap. An invalid backends projection keeps the live
// Deployment's last good ConfigMap instead of re-rendering.
func reconcileConfig(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	p.configMapName = p.backends.live.configMap
	if !p.backends.valid {
		return ctrl.Result{}, nil
	}
	rules, msg, err := policyConfigMapRules(ctx, p, g)
	if err != nil {
		return ctrl.Result{}, err
	}
	if msg != "" {
		pipeline.SetCondition(g, v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError, msg)
		return ctrl.Result{RequeueAfter: SecretsPollInterval}, nil
	}
	files, err := render.ConfigFiles(g, render.ConfigFacts{DefaultBackend: p.backends.defaultBackend, PolicyRules: rules, StoreCount: p.backends.stores})
	if err != nil {
		// Until the spec is fixed the Deployment keeps running the last good config.
		return terminalFailure(g, v1alpha1.ConditionSecretsReady, v1alpha1.ReasonConfigError, fmt.Sprintf("cannot render the config: %v", err))
	}
	name := render.ConfigMapName(g.Name, files)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Namespace, Labels: childLabels(g, componentConfig)},
		Immutable:  ptr.To(true),
		Data:       files,
	}
	if err := ensureImmutable(ctx, p, g, cm, &corev1.ConfigMapList{}, componentConfig, p.backends.live.configMaps); err != nil {
		return ctrl.Result{}, err
	}
	p.configMapName = name
	return ctrl.Result{}, nil
}

// policyConfigMapRules reads the rules of policyOverrides.configMapRef. msg
// says what is wrong with the ConfigMap, if anything.
func policyConfigMapRules(ctx context.Context, p *pass, g *v1alpha1.Glance) (map[string]string, string, error) {
	po := g.Spec.PolicyOverrides
	if po == nil || po.ConfigMapRef == nil {
		return nil, "", nil
	}
	name := po.ConfigMapRef.Name
	var cm corev1.ConfigMap
	err := p.cluster.Reader.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: name}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("policy ConfigMap %q not found", name), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("get ConfigMap %s/%s: %w", g.Namespace, name, err)
	}
	raw, ok := cm.Data[PolicyConfigMapKey]
	if !ok {
		return nil, fmt.Sprintf("policy ConfigMap %q has no key %q", name, PolicyConfigMapKey), nil
	}
	var rules map[string]string
	if err := yaml.Unmarshal([]byte(raw), &rules); err != nil {
		return nil, fmt.Sprintf("policy ConfigMap %q: %s is not a map of rule names to check strings: %v", name, PolicyConfigMapKey, err), nil
	}
	return rules, "", nil
}
