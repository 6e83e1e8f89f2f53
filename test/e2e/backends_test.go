package e2e

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
)

// mounted are the names of the config ConfigMap and the backends Secret the
// Deployment runs with.
type mounted struct{ configMap, backendsSecret string }

func (s *scene) mounted() mounted {
	s.t.Helper()
	var m mounted
	for _, v := range s.deployment().Spec.Template.Spec.Volumes {
		switch {
		case v.Name == render.VolumeConfig && v.ConfigMap != nil:
			m.configMap = v.ConfigMap.Name
		case v.Name == render.VolumeBackends && v.Secret != nil:
			m.backendsSecret = v.Secret.SecretName
		}
	}
	if m.configMap == "" || m.backendsSecret == "" {
		s.t.Fatalf("the Deployment mounts config %q and backends %q", m.configMap, m.backendsSecret)
	}
	return m
}

// glanceConf is the glance-api.conf of a config ConfigMap.
func (s *scene) glanceConf(configMap string) string {
	s.t.Helper()
	var cm corev1.ConfigMap
	if !s.get(configMap, &cm) {
		s.t.Fatalf("config ConfigMap %s does not exist", configMap)
	}
	return cm.Data["glance-api.conf"]
}

// backendsConf is the backends.conf of a backends Secret.
func (s *scene) backendsConf(secret string) string {
	s.t.Helper()
	var sec corev1.Secret
	if !s.get(secret, &sec) {
		s.t.Fatalf("backends Secret %s does not exist", secret)
	}
	return string(sec.Data["backends.conf"])
}

// option returns the value of key in an INI section, and whether the
// section exists.
func option(conf, section, key string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(conf))
	current, found, value := "", false, ""
	kv := regexp.MustCompile(`^([^=\s]+)\s*=\s*(.*)$`)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			current = line[1 : len(line)-1]
			found = found || current == section
			continue
		}
		if m := kv.FindStringSubmatch(line); m != nil && current == section && m[1] == key {
			value = m[2]
		}
	}
	return value, found
}

func (s *scene) setDefault(backend string, isDefault bool) error {
	s.t.Helper()
	for {
		b := &v1alpha1.GlanceBackend{}
		if !s.get(backend, b) {
			s.t.Fatalf("no GlanceBackend %s", backend)
		}
		b.Spec.IsDefault = isDefault
		err := cl.Update(context.Background(), b)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// Switching the default store: the webhook refuses a second default; with
// none, the projection is invalid and the Deployment keeps running its
// last good ConfigMap and Secret; once the other store is the default, the
// new projection rolls out.
func TestDefaultBackendSwitch(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-backend-switch")
	s.world()
	s.backend("alpha", true)
	s.backend("beta", false)
	s.glance()
	s.ready()
	good := s.mounted()
	if v, _ := option(s.glanceConf(good.configMap), "glance_store", "default_backend"); v != "alpha" {
		t.Errorf("default_backend %q, want alpha", v)
	}
	if v, _ := option(s.backendsConf(good.backendsSecret), "DEFAULT", "enabled_backends"); v != "alpha:s3,beta:s3" {
		t.Errorf("enabled_backends %q, want alpha:s3,beta:s3", v)
	}

	err := s.setDefault("beta", true)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `GlanceBackend "alpha" is already the default store of Glance "glance"`) {
		t.Fatalf("a second default backend: %v, want it denied naming the current default", err)
	}

	if err := s.setDefault("alpha", false); err != nil {
		t.Fatal(err)
	}
	c := s.condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend)
	if !strings.Contains(c.Message, "keeping the last good configuration") {
		t.Errorf("BackendsReady message %q", c.Message)
	}
	s.condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAllReady)
	// The last good names stay mounted, and their objects stay, for as long
	// as the projection is invalid.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if now := s.mounted(); now != good {
			t.Fatalf("an invalid projection changed the Deployment's mounts from %+v to %+v", good, now)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !s.get(good.configMap, &corev1.ConfigMap{}) || !s.get(good.backendsSecret, &corev1.Secret{}) {
		t.Errorf("the last good ConfigMap %s or Secret %s is gone", good.configMap, good.backendsSecret)
	}
	s.podsRunning(2)

	if err := s.setDefault("beta", true); err != nil {
		t.Fatal(err)
	}
	s.condition(v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected)
	var now mounted
	s.eventually("the Deployment to mount the new config", func() (bool, string) {
		now = s.mounted()
		return now.configMap != good.configMap, fmt.Sprintf("%+v", now)
	})
	if v, _ := option(s.glanceConf(now.configMap), "glance_store", "default_backend"); v != "beta" {
		t.Errorf("default_backend %q after the switch, want beta", v)
	}
	s.ready()
	s.podsRunning(2)
}

// Deleting a backend drops its store from the mounted backends Secret.
func TestBackendDeletion(t *testing.T) {
	t.Parallel()
	s := newScene(t, "e2e-backend-delete")
	s.world()
	s.backend("alpha", true)
	s.backend("beta", false)
	s.glance()
	s.ready()
	before := s.mounted()
	if _, ok := option(s.backendsConf(before.backendsSecret), "beta", "s3_store_host"); !ok {
		t.Fatalf("the mounted backends.conf has no [beta] section:\n%s", s.backendsConf(before.backendsSecret))
	}
	b := &v1alpha1.GlanceBackend{}
	s.get("beta", b)
	if err := cl.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	var now mounted
	s.eventually("a backends Secret without beta mounted", func() (bool, string) {
		now = s.mounted()
		if now.backendsSecret == before.backendsSecret {
			return false, "still " + now.backendsSecret
		}
		conf := s.backendsConf(now.backendsSecret)
		_, hasBeta := option(conf, "beta", "s3_store_host")
		return !hasBeta, conf
	})
	conf := s.backendsConf(now.backendsSecret)
	if v, _ := option(conf, "DEFAULT", "enabled_backends"); v != "alpha:s3" {
		t.Errorf("enabled_backends %q after the deletion, want alpha:s3", v)
	}
	if _, ok := option(conf, "alpha", "s3_store_host"); !ok {
		t.Errorf("the [alpha] section went too:\n%s", conf)
	}
	s.ready()
	s.podsRunning(2)
}
