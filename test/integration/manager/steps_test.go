package manager

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/operatortest"
)

func TestStoreNotReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.SetStore(false, "vault sealed")
	e.Credentials("pw")
	e.Glance()
	c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonSecretStoreNotReady)
	if want := `ClusterSecretStore "` + e.Store + `" is not Ready: Test: vault sealed`; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	// The store watch wakes the Glance when the store turns Ready.
	e.SetStore(true, "")
	e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
}

func TestStoreMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.Glance(func(g *v1alpha1.Glance) {
		g.Spec.SecretStoreRef = &v1alpha1.SecretStoreReference{Kind: v1alpha1.SecretStoreKindName, Name: "absent"}
	})
	c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonSecretStoreNotReady)
	if c.Message != `SecretStore "absent" not found` {
		t.Errorf("message %q", c.Message)
	}
}

func TestSecretMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// An ExternalSecret targets the database Secret but has not synced it.
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": "db-sync", "namespace": e.NS},
		"spec":     map[string]any{"target": map[string]any{"name": "glance-db"}},
	}}
	e.Create(es)
	es.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": "could not get secret data from provider",
		"lastTransitionTime": "2026-01-01T00:00:00Z",
	}}}
	if err := cl.Status().Update(ctx, es); err != nil {
		t.Fatal(err)
	}
	e.Glance()
	c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForDBCredentials)
	want := `Secret "glance-db" not found; ExternalSecret "db-sync" targets it but has not synced it (SecretSyncedError: could not get secret data from provider)`
	if c.Message != want {
		t.Errorf("message\n  %q\nwant\n  %q", c.Message, want)
	}

	// The database Secret appears; the service user's has no ExternalSecret.
	e.Secret("glance-db", map[string]string{"username": "glance", "password": "pw"})
	c = e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForServiceUserCredentials)
	if want := `Secret "glance-service-user" not found; no ExternalSecret in namespace ` + e.NS + ` targets it`; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}

	// A Secret without the key says so, never a value.
	e.Secret("glance-service-user", map[string]string{"pass": "service-password"})
	e.Eventually("the missing key reported", func() bool {
		g := &v1alpha1.Glance{}
		_ = cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance"}, g)
		for _, c := range g.Status.Conditions {
			if c.Type == v1alpha1.ConditionSecretsReady && strings.Contains(c.Message, `lacks key "password"`) {
				return !strings.Contains(c.Message, "service-password")
			}
		}
		return false
	}, nil)
}

func TestConnectionSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Credentials("p@ss:w/rd?#%")
	e.Glance()
	e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
	want := "mysql+pymysql://glance:p%40ss%3Aw%2Frd%3F%23%25@mariadb." + e.NS + ".svc:3306/glance?charset=utf8"
	var s corev1.Secret
	e.Eventually("the connection Secret", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &s) == nil && string(s.Data["connection"]) == want
	}, func() string { return "connection " + string(s.Data["connection"]) })
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Glance" || !*s.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v", s.OwnerReferences)
	}

	if slot := string(s.Data["slot"]); slot != "a" {
		t.Errorf("the connection names user slot %q, want a", slot)
	}

	// Rotating the password at the source reaches the operator through
	// the metadata-only Secret watch: it makes the other database user
	// with it, and the DSN stays the live user's until that one is Ready
	// (which no mariadb-operator here makes it).
	rotate(t, e, "glance-db", "rotated")
	var b corev1.Secret
	e.Eventually("the rotated password in slot b's Secret", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-user-b"}, &b) == nil && string(b.Data["password"]) == "rotated"
	}, nil)
	if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &s); err != nil || string(s.Data["connection"]) != want {
		t.Fatalf("the rotation changed the live connection before the new user was Ready (%v)", err)
	}

	// The operator keeps no password between passes: a DSN edited by hand,
	// or its Secret deleted, is rebuilt from what it stored.
	rotated := string(s.Data["connection"])
	s.Data["connection"] = []byte("mysql+pymysql://glance:edited@elsewhere:3306/glance")
	if err := cl.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the edited connection restored", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &s) == nil && string(s.Data["connection"]) == rotated
	}, func() string { return "connection " + string(s.Data["connection"]) })
	if err := cl.Delete(ctx, &s); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the deleted connection made again", func() bool {
		var again corev1.Secret
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &again) == nil && again.UID != s.UID && string(again.Data["connection"]) == rotated
	}, nil)

	// A spec that moves the database changes the DSN, though no Secret
	// changed.
	e.UpdateGlance(func(g *v1alpha1.Glance) { g.Spec.Database.Database = "images" })
	e.Eventually("the connection to the new database", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &s) == nil &&
			strings.HasSuffix(string(s.Data["connection"]), "/images?charset=utf8")
	}, func() string { return "connection " + string(s.Data["connection"]) })
}

// A brownfield Glance has one database user, the credentials Secret's: a
// rotation at the source reaches the connection at once.
func TestConnectionSecretOfBrownfield(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Credentials("pw")
	e.Glance(operatortest.Brownfield)
	var s corev1.Secret
	e.Eventually("the connection Secret", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &s) == nil &&
			strings.Contains(string(s.Data["connection"]), "glance:pw@db.example.com:3306/")
	}, func() string { return "connection " + string(s.Data["connection"]) })
	rotate(t, e, "glance-db", "rotated")
	e.Eventually("the rotated connection", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: "glance-db-connection"}, &s) == nil &&
			strings.Contains(string(s.Data["connection"]), "glance:rotated@")
	}, nil)
	if _, ok := s.Data["slot"]; ok {
		t.Error("a brownfield connection names a user slot")
	}
}

// rotate sets the password of a credentials Secret.
func rotate(t *testing.T, e *operatortest.Env, name, password string) {
	t.Helper()
	var sec corev1.Secret
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: name}, &sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["password"] = []byte(password)
	if err := cl.Update(context.Background(), &sec); err != nil {
		t.Fatal(err)
	}
}

func configFile(t *testing.T, e *operatortest.Env, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["glance-api.conf"]
}

func setDefault(t *testing.T, e *operatortest.Env, name string, isDefault bool) {
	t.Helper()
	b := &v1alpha1.GlanceBackend{}
	ctx := context.Background()
	if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: name}, b); err != nil {
		t.Fatal(err)
	}
	b.Spec.IsDefault = isDefault
	if err := cl.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultSwitch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Backend("beta", false, "s3")
	e.Glance()
	e.ConditionSaying(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected, "projected alpha, beta (default alpha)")
	var configs []string
	e.Eventually("one config ConfigMap", func() bool {
		configs = e.Names(&corev1.ConfigMapList{}, "config")
		return len(configs) == 1
	}, func() string { return strings.Join(configs, ",") })
	// A pass that saw only alpha's credentials ready may have rendered an
	// earlier backends Secret; what matters is that moving the default adds
	// none.
	backends := e.Names(&corev1.SecretList{}, "backends")
	if len(backends) == 0 {
		t.Fatal("no backends Secret")
	}
	if conf := configFile(t, e, configs[0]); !strings.Contains(conf, "default_backend = alpha") {
		t.Fatalf("glance-api.conf lacks default_backend = alpha:\n%s", conf)
	}

	// Unsetting the only default is an invalid projection: nothing is
	// re-rendered.
	setDefault(t, e, "alpha", false)
	c := e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)
	if !strings.Contains(c.Message, "none of the rendered backends is the default; keeping the last good configuration") {
		t.Errorf("message %q", c.Message)
	}
	if got := e.Names(&corev1.ConfigMapList{}, "config"); !slices.Equal(got, configs) {
		t.Errorf("an invalid projection changed the ConfigMaps: %v -> %v", configs, got)
	}

	// beta becomes the default: a new ConfigMap, the same backends Secret.
	setDefault(t, e, "beta", true)
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	var now []string
	e.Eventually("a second config ConfigMap", func() bool {
		now = e.Names(&corev1.ConfigMapList{}, "config")
		return len(now) == 2
	}, func() string { return strings.Join(now, ",") })
	newest := ""
	for _, n := range now {
		if n != configs[0] {
			newest = n
		}
	}
	if conf := configFile(t, e, newest); !strings.Contains(conf, "default_backend = beta") {
		t.Errorf("new glance-api.conf lacks default_backend = beta:\n%s", conf)
	}
	if got := e.Names(&corev1.SecretList{}, "backends"); !slices.Equal(got, backends) {
		t.Errorf("moving the default changed the backends Secrets: %v -> %v", backends, got)
	}
}

// A backends Secret deleted under a running Glance is made again: the
// operator keeps no credential, so it reads them again to render it.
func TestDeletedBackendsSecretIsMadeAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Glance()
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	var backends []string
	e.Eventually("one backends Secret", func() bool {
		backends = e.Names(&corev1.SecretList{}, "backends")
		return len(backends) == 1
	}, nil)
	var before corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: backends[0]}, &before); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, &before); err != nil {
		t.Fatal(err)
	}
	// Any later pass (the Deployment's status, a requeue) must see it gone.
	e.UpdateGlance(func(g *v1alpha1.Glance) { g.Labels = map[string]string{"touched": "yes"} })
	var after corev1.Secret
	e.Eventually("the backends Secret made again", func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: backends[0]}, &after) == nil && after.UID != before.UID
	}, nil)
	if string(after.Data["backends.conf"]) != string(before.Data["backends.conf"]) {
		t.Errorf("backends.conf made again differs:\n%s\nwas\n%s", after.Data["backends.conf"], before.Data["backends.conf"])
	}
}

// TestTwoDefaults: a second default makes the projection invalid; nothing
// new is rendered and the last good config stays.
func TestTwoDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Glance()
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionTrue, v1alpha1.ReasonSecretsAvailable)
	var configs, backends []string
	e.Eventually("the first config ConfigMap", func() bool {
		configs = e.Names(&corev1.ConfigMapList{}, "config")
		return len(configs) == 1
	}, nil)
	backends = e.Names(&corev1.SecretList{}, "backends")

	e.Backend("beta", true, "s3")
	c := e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)
	if !strings.Contains(c.Message, "the rendered backends alpha, beta are all marked default") {
		t.Errorf("message %q", c.Message)
	}
	if got := e.Names(&corev1.ConfigMapList{}, "config"); !slices.Equal(got, configs) {
		t.Errorf("an invalid projection changed the config ConfigMaps from %v to %v", configs, got)
	}
	if got := e.Names(&corev1.SecretList{}, "backends"); !slices.Equal(got, backends) {
		t.Errorf("an invalid projection changed the backends Secrets from %v to %v", backends, got)
	}
}

func TestSkippedBackendIsolatesSiblings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Credentials("pw")
	e.Secret("good", map[string]string{"access-key-id": "ak", "secret-access-key": "sk"})
	e.Secret("half", map[string]string{"access-key-id": "ak"})
	e.Secret("control", map[string]string{"access-key-id": "ak\n[DEFAULT]", "secret-access-key": "sk"})
	e.Backend("alpha", true, "good")
	e.Backend("beta", false, "half")
	e.Backend("gamma", false, "control")
	e.Glance()

	// A pass may see gamma's credentials before it has judged them.
	c := e.ConditionSaying(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected, "skipped beta, gamma")
	if !strings.Contains(c.Message, "projected alpha (default alpha)") {
		t.Errorf("message %q", c.Message)
	}
	e.BackendCondition("beta", v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForCredentials)
	var events eventsv1.EventList
	e.Eventually("GlanceBackendSkipped events for beta and gamma", func() bool {
		if err := cl.List(ctx, &events, client.InNamespace(e.NS)); err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, ev := range events.Items {
			if ev.Reason == "GlanceBackendSkipped" && ev.Type == corev1.EventTypeWarning && ev.Regarding.Kind == "Glance" {
				for _, n := range []string{"beta", "gamma"} {
					if strings.Contains(ev.Note, `backend "`+n+`" skipped`) {
						seen[n] = true
					}
				}
				if strings.Contains(ev.Note, "ak") && strings.Contains(ev.Note, "[DEFAULT]") {
					t.Errorf("an event quotes a credential: %q", ev.Note)
				}
			}
		}
		return seen["beta"] && seen["gamma"]
	}, func() string { return "events: " + eventNotes(events) })

	backends := e.Names(&corev1.SecretList{}, "backends")
	if len(backends) != 1 {
		t.Fatalf("backends Secrets %v", backends)
	}
	var s corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: backends[0]}, &s); err != nil {
		t.Fatal(err)
	}
	conf := string(s.Data["backends.conf"])
	if !strings.Contains(conf, "[alpha]") || strings.Contains(conf, "[beta]") || strings.Contains(conf, "[gamma]") {
		t.Errorf("backends.conf:\n%s", conf)
	}
}

func eventNotes(l eventsv1.EventList) string {
	var notes []string
	for _, ev := range l.Items {
		notes = append(notes, ev.Reason+": "+ev.Note)
	}
	return strings.Join(notes, " | ")
}

// TestCredentialFlipWakesGlance: nothing in this Glance's pipeline polls once
// its Secrets are there, so only the GlanceBackend watch can bring the
// backend in when its credentials turn ready.
func TestCredentialFlipWakesGlance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Credentials("pw")
	s3 := e.Secret("s3", map[string]string{"access-key-id": "ak"})
	e.Glance()
	// Waiting means no backend is attached at all.
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends)
	e.Backend("alpha", true, "s3")
	e.BackendCondition("alpha", v1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForCredentials)
	// One attached, none credential-ready: zero ready defaults is an
	// invalid projection.
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)

	if err := cl.Get(ctx, client.ObjectKeyFromObject(s3), s3); err != nil {
		t.Fatal(err)
	}
	s3.Data["secret-access-key"] = []byte("sk")
	if err := cl.Update(ctx, s3); err != nil {
		t.Fatal(err)
	}
	e.BackendCondition("alpha", v1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, v1alpha1.ReasonCredentialsAvailable)
	e.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	// Without a Deployment the store is not projected yet, and says so.
	e.BackendCondition("alpha", v1alpha1.ConditionConfigProjected, metav1.ConditionFalse, v1alpha1.ReasonWaitingForProjection)
}

func TestTargetClusterUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.Glance(func(g *v1alpha1.Glance) {
		g.Spec.TargetClusterRef = &v1alpha1.TargetClusterReference{Name: "region-two"}
	})
	c := e.Condition(v1alpha1.ConditionSecretsReady, metav1.ConditionFalse, v1alpha1.ReasonTargetClusterUnavailable)
	if !strings.Contains(c.Message, `target cluster "region-two" is not registered`) {
		t.Errorf("message %q", c.Message)
	}
	g := &v1alpha1.Glance{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: "glance"}, g); err != nil {
		t.Fatal(err)
	}
	if len(g.Finalizers) != 0 {
		t.Errorf("an unresolvable Glance took finalizers %v", g.Finalizers)
	}
	if got := e.Names(&corev1.SecretList{}, "database"); len(got) != 0 {
		t.Errorf("an unresolvable Glance created %v", got)
	}
}

func TestReadyAggregatesAndStampsGeneration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Credentials("pw")
	e.Glance()
	c := e.Condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	if !strings.Contains(c.Message, "BackendsReady") || !strings.Contains(c.Message, "DBPurgeReady") {
		t.Errorf("Ready message %q does not list what is not ready", c.Message)
	}
	g := &v1alpha1.Glance{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: "glance"}, g); err != nil {
		t.Fatal(err)
	}
	if g.Status.ObservedGeneration != g.Generation {
		t.Errorf("observedGeneration %d, generation %d", g.Status.ObservedGeneration, g.Generation)
	}
	for _, c := range g.Status.Conditions {
		if c.ObservedGeneration != g.Generation {
			t.Errorf("condition %s observedGeneration %d, generation %d", c.Type, c.ObservedGeneration, g.Generation)
		}
	}
}
