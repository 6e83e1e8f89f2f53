package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	glancecontroller "github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// stepErrors reads the reconcile error counter of a step.
func stepErrors(step string) float64 {
	return testutil.ToFloat64(mgr.Metrics.Reconcile.Errors.WithLabelValues(step, v1alpha1.ConditionSecretsReady))
}

// TestConfigError: a spec the Config or DBConnectionSecret step cannot
// render reports SecretsReady=False/ConfigError (both "report through
// SecretsReady"), renders nothing, and the error counter names the step
// ("a distinct sub_reconciler label on the error counter disambiguates
// them"). This suite has no admission webhook, so the specs reach the
// reconciler as a CR that bypassed it would.
func TestConfigError(t *testing.T) {
	t.Parallel()

	t.Run("unrenderable extraConfig", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.Credentials("pw")
		e.DefaultBackend("alpha")
		before := stepErrors("Config")
		e.Glance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": "1\n[database]\nconnection = sqlite://"}}
		})
		// The controller judges it by the admission rules before any step.
		c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
		if !strings.Contains(c.Message, "spec.extraConfig[DEFAULT][image_size_cap]") || !strings.Contains(c.Message, "control character") {
			t.Errorf("message %q does not say what cannot be rendered", c.Message)
		}
		if got := e.Names(&corev1.ConfigMapList{}, "config"); len(got) != 0 {
			t.Errorf("an unrenderable config produced ConfigMaps %v", got)
		}
		e.Eventually("a Config step error counted", func() bool { return stepErrors("Config") > before }, nil)

		// A valid spec renders.
		e.UpdateGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": "1099511627776"}}
		})
		e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
		var good []string
		e.Eventually("one config ConfigMap", func() bool {
			good = e.Names(&corev1.ConfigMapList{}, "config")
			return len(good) == 1
		}, nil)

		// Invalid again: ConfigError, and the last good ConfigMap is all
		// there is.
		e.UpdateGlance(func(g *v1alpha1.Glance) {
			g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_size_cap": "2\r\n"}}
		})
		e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
		if got := e.Names(&corev1.ConfigMapList{}, "config"); !slices.Equal(got, good) {
			t.Errorf("config ConfigMaps %v after the invalid spec, want the last good %v", got, good)
		}
	})

	t.Run("unbuildable database connection", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.Credentials("pw")
		before := stepErrors("DBConnectionSecret")
		e.Glance(func(g *v1alpha1.Glance) {
			g.Spec.Database.ClusterRef = nil
			g.Spec.Database.Host = "db.example.com/glance?x="
		})
		c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
		if !strings.Contains(c.Message, "cannot build the database connection") || !strings.Contains(c.Message, "neither a host name nor an IP address") {
			t.Errorf("message %q", c.Message)
		}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("the connection Secret exists for an unbuildable DSN (%v)", err)
		}
		e.Eventually("a DBConnectionSecret step error counted", func() bool { return stepErrors("DBConnectionSecret") > before }, nil)

		e.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.Database.Host = "db.example.com" })
		e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
	})

	t.Run("policy ConfigMap", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ctx := context.Background()
		e.Credentials("pw")
		e.DefaultBackend("alpha")
		e.Glance(func(g *v1alpha1.Glance) {
			g.Spec.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: "glance-policy"}}
		})
		c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
		if c.Message != `policy ConfigMap "glance-policy" not found` {
			t.Errorf("message %q", c.Message)
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "glance-policy", Namespace: e.NS},
			Data:       map[string]string{"rules.yaml": `"get_images": "role:reader"`},
		}
		e.Create(cm)
		e.Eventually("the missing key reported", func() bool {
			c = e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
			return c.Message == `policy ConfigMap "glance-policy" has no key "policy.yaml"`
		}, func() string { return c.Message })
		if got := e.Names(&corev1.ConfigMapList{}, "config"); len(got) != 0 {
			t.Errorf("config ConfigMaps %v rendered without the policy", got)
		}

		cm.Data = map[string]string{"policy.yaml": `"get_images": "role:reader"`}
		if err := cl.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
		var configs []string
		e.Eventually("one config ConfigMap", func() bool {
			configs = e.Names(&corev1.ConfigMapList{}, "config")
			return len(configs) == 1
		}, nil)
		var rendered corev1.ConfigMap
		if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: configs[0]}, &rendered); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rendered.Data["policy.yaml"], "get_images") {
			t.Errorf("the rendered policy.yaml lacks the ConfigMap's rule:\n%s", rendered.Data["policy.yaml"])
		}
	})
}

// TestSteadyFalseWritesNothing: SecretsReady is shared by the Secrets,
// DBConnectionSecret and Config steps. While Config holds it False (a policy
// ConfigMap that is missing), the Secrets step's True on the way does not
// move its transition time, and the 15 s retries write nothing.
func TestSteadyFalseWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Glance(func(g *v1alpha1.Glance) {
		g.Spec.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: "glance-policy"}}
	})
	first := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonConfigError)
	// The passes the children's creation woke are over once none has run
	// for a second: what is left is the retry the last one asked for.
	key := types.NamespacedName{Namespace: e.NS, Name: "glance"}
	last := reconcileTrace.AwaitQuiet(t, "glance", key, time.Second)
	if last.Outcome != operatortest.OutcomeRequeueAfter || last.After != glancecontroller.SecretsPollInterval {
		t.Fatalf("the quiet pass ended %s, want a retry after %s", last, glancecontroller.SecretsPollInterval)
	}
	before := e.ReadGlance()
	// That retry of the Config step, 15 s on.
	retry := reconcileTrace.PassAfter(t, "glance", key, last.Ended, operatortest.Within(glancecontroller.SecretsPollInterval+15*time.Second))
	after := e.ReadGlance()
	c := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.ConditionSecretsReady)
	if c == nil || c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Equal(&first.LastTransitionTime) {
		t.Errorf("SecretsReady %+v after a retry; want it False since %v", c, first.LastTransitionTime)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the Glance was written during a retry that changed nothing (resourceVersion %s to %s; the retry %s)", before.ResourceVersion, after.ResourceVersion, retry)
	}
}

// TestBackendCABundle: a backend whose s3.caBundleSecretRef names a
// missing Secret, then one that is not PEM certificates, reports
// CredentialsReady=False saying so and is not projected; once the Secret
// holds a CA certificate, the backends Secret holds the bundle beside
// backends.conf, which points s3_store_cacert at it, and a new CA in the
// Secret makes a new backends Secret.
func TestBackendCABundle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	e.Glance()
	b := fixtures.NewBackend(e.NS, "tls", "glance", true, "s3")
	b.Spec.S3.Host = "https://s3.example.com"
	b.Spec.S3.CABundleSecretRef = &v1alpha1.SecretKeySelector{Name: "s3-ca"}
	e.Create(b)

	credentialsSaying := func(status metav1.ConditionStatus, fragment string) {
		t.Helper()
		var last *metav1.Condition
		operatortest.Eventually(t, "backend tls CredentialsReady saying "+fragment, func() error {
			got := &v1alpha1.GlanceBackend{}
			if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: "tls"}, got); err != nil {
				return err
			}
			if last = meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionCredentialsReady); last == nil || last.Status != status || !strings.Contains(last.Message, fragment) {
				return fmt.Errorf("CredentialsReady %+v", last)
			}
			return nil
		})
	}
	credentialsSaying(metav1.ConditionFalse, `Secret "s3-ca" not found`)
	ca := e.Secret("s3-ca", map[string]string{"ca.crt": "not a certificate"})
	credentialsSaying(metav1.ConditionFalse, `CA bundle Secret "s3-ca" key "ca.crt" holds something other than PEM certificates`)
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)

	authority, err := controlplane.NewCA("s3 test CA")
	if err != nil {
		t.Fatal(err)
	}
	ca.StringData = map[string]string{"ca.crt": string(authority.CertPEM)}
	if err := cl.Update(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	credentialsSaying(metav1.ConditionTrue, `Secret "s3-ca" holds the CA bundle`)
	first := projectedBundle(t, e, "", string(authority.CertPEM))
	if want := "s3_store_cacert = " + render.BackendsDir + render.S3CABundleKey("tls"); !strings.Contains(string(first.Data[render.BackendsConfKey]), want) {
		t.Errorf("backends.conf lacks %q:\n%s", want, first.Data[render.BackendsConfKey])
	}

	// A new CA in the same Secret makes a new backends Secret, which the
	// pods would roll onto.
	next, err := controlplane.NewCA("s3 test CA, rotated")
	if err != nil {
		t.Fatal(err)
	}
	ca.StringData = map[string]string{"ca.crt": string(next.CertPEM)}
	if err := cl.Update(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	projectedBundle(t, e, first.Name, string(next.CertPEM))
}

// projectedBundle waits until the Glance projects its backends into a
// Secret other than previous, and returns that Secret, whose CA bundle of
// the backend tls must be bundle.
func projectedBundle(t *testing.T, e *operatortest.Env, previous, bundle string) *corev1.Secret {
	t.Helper()
	var backends corev1.Secret
	operatortest.Eventually(t, "the backends Secret holding the CA bundle", func() error {
		g := e.ReadGlance()
		c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionBackendsReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("BackendsReady %+v", c)
		}
		_, projected, _ := strings.Cut(c.Message, " into Secret ")
		name, _, _ := strings.Cut(projected, ";")
		if name == previous {
			return fmt.Errorf("still projected into %s", name)
		}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: name}, &backends); err != nil {
			return err
		}
		if got := string(backends.Data[render.S3CABundleKey("tls")]); got != bundle {
			return fmt.Errorf("the backends Secret %s holds %q as the CA bundle", name, got)
		}
		return nil
	})
	return &backends
}

// TestBackendWaitingForParent: a GlanceBackend whose spec.glanceRef names no
// Glance reports WaitingForParent on CredentialsReady and ConfigProjected,
// even with its credentials in place; the parent appearing wakes it (the
// controller "watches its parent Glance").
func TestBackendWaitingForParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Secret("s3", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	e.Create(fixtures.NewBackend(e.NS, "orphan", "glance", true, "s3"))

	c := e.BackendCondition("orphan", v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForParent)
	if c.Message != `Glance "glance" not found` {
		t.Errorf("CredentialsReady message %q", c.Message)
	}
	e.BackendCondition("orphan", v1alpha1.ConditionConfigProjected, metav1.ConditionFalse, v1alpha1.ReasonWaitingForParent)
	e.BackendCondition("orphan", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)

	e.Credentials("pw")
	e.Glance()
	e.BackendCondition("orphan", v1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, v1alpha1.ReasonCredentialsAvailable)
	e.BackendCondition("orphan", v1alpha1.ConditionConfigProjected, metav1.ConditionFalse, v1alpha1.ReasonWaitingForProjection)
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
}
