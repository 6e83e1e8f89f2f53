package glance

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// TestPruneHistory: besides the names kept, the historyKept newest
// children of the component stay; ties in creation time are broken by
// name, the greater counting as newer.
func TestPruneHistory(t *testing.T) {
	epoch := time.Unix(1_800_000_000, 0)
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	// configMap is a config ConfigMap of the Glance created at epoch+age.
	configMap := func(name string, age time.Duration) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "openstack", Name: name, UID: types.UID(name + "-uid"),
			Labels:            childLabels(g, componentConfig),
			CreationTimestamp: metav1.Time{Time: epoch.Add(age)},
		}}
	}
	labelled := func(cm *corev1.ConfigMap, labels map[string]string) *corev1.ConfigMap {
		cm.Labels = labels
		return cm
	}
	for _, tt := range []struct {
		name    string
		objs    []client.Object
		keep    []string
		deleted []string
	}{
		{"no history", nil, []string{"cm-current", ""}, nil},
		{"within history", []client.Object{
			configMap("cm-1", 1*time.Second), configMap("cm-2", 2*time.Second), configMap("cm-3", 3*time.Second), configMap("cm-current", 4*time.Second),
		}, []string{"cm-current", ""}, nil},
		{"oldest beyond history", []client.Object{
			configMap("cm-1", 1*time.Second), configMap("cm-2", 2*time.Second), configMap("cm-3", 3*time.Second),
			configMap("cm-4", 4*time.Second), configMap("cm-5", 5*time.Second), configMap("cm-current", 6*time.Second),
		}, []string{"cm-current", ""}, []string{"cm-1", "cm-2"}},
		// The live ConfigMap is what the Deployment runs with, however old;
		// it does not take a history slot.
		{"live kept however old", []client.Object{
			configMap("cm-live", 1*time.Second), configMap("cm-2", 2*time.Second), configMap("cm-3", 3*time.Second),
			configMap("cm-4", 4*time.Second), configMap("cm-5", 5*time.Second), configMap("cm-current", 6*time.Second),
		}, []string{"cm-current", "cm-live"}, []string{"cm-2"}},
		// A rollback may make an old ConfigMap current again.
		{"current older than the history", []client.Object{
			configMap("cm-current", 1*time.Second), configMap("cm-2", 2*time.Second), configMap("cm-3", 3*time.Second),
			configMap("cm-4", 4*time.Second), configMap("cm-5", 5*time.Second),
		}, []string{"cm-current", ""}, []string{"cm-2"}},
		// Creation timestamps have a one-second grain.
		{"ties in creation time", []client.Object{
			configMap("cm-x", 1*time.Second),
			configMap("cm-b", 5*time.Second), configMap("cm-d", 5*time.Second), configMap("cm-a", 5*time.Second), configMap("cm-c", 5*time.Second),
			configMap("cm-current", 5*time.Second),
		}, []string{"cm-current", ""}, []string{"cm-a", "cm-x"}},
		{"another component's and another Glance's are not history", []client.Object{
			labelled(configMap("backends-1", 0), childLabels(g, componentBackends)),
			labelled(configMap("other-1", 0), childLabels(fixtures.NewGlance("openstack", "other", "2025.2"), componentConfig)),
			labelled(configMap("user-1", 0), map[string]string{"app": "mine"}),
			configMap("cm-1", 1*time.Second), configMap("cm-2", 2*time.Second), configMap("cm-3", 3*time.Second), configMap("cm-current", 4*time.Second),
		}, []string{"cm-current", ""}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newApplyScene(t, "", tt.objs...)
			before := names(t, s.server)
			if err := pruneHistory(context.Background(), s.p, g, &corev1.ConfigMapList{}, componentConfig, tt.keep); err != nil {
				t.Fatal(err)
			}
			slices.Sort(s.writes.deleted)
			if !slices.Equal(s.writes.deleted, tt.deleted) {
				t.Errorf("deleted %v, want %v", s.writes.deleted, tt.deleted)
			}
			after := names(t, s.server)
			want := slices.DeleteFunc(before, func(n string) bool { return slices.Contains(tt.deleted, n) })
			if !slices.Equal(after, want) {
				t.Errorf("left %v, want %v", after, want)
			}
		})
	}
}

// names are the ConfigMaps stored, sorted.
func names(t *testing.T, c client.Client) []string {
	t.Helper()
	var list corev1.ConfigMapList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name)
	}
	slices.Sort(out)
	return out
}

// TestEnsureImmutable: a content-addressed child is created once; an
// existing one of the same name is never written, whatever it holds.
func TestEnsureImmutable(t *testing.T) {
	secret := func(value string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-backends-0123"},
			Immutable:  ptr.To(true),
			Data:       map[string][]byte{BackendsConfKey: []byte(value)},
		}
	}
	for _, tt := range []struct {
		name     string
		existing []client.Object
		creates  int
		want     string
	}{
		{"absent: created", nil, 1, "new"},
		{"present: left alone", []client.Object{secret("old")}, 0, "old"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newApplyScene(t, "", tt.existing...)
			if err := ensureImmutable(context.Background(), s.p, s.g, secret("new"), secretMetadataList(), componentBackends, nil); err != nil {
				t.Fatal(err)
			}
			s.writes.expect(t, tt.creates, 0)
			got := &corev1.Secret{}
			if err := s.server.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance-backends-0123"}, got); err != nil {
				t.Fatal(err)
			}
			if string(got.Data[BackendsConfKey]) != tt.want {
				t.Errorf("the Secret holds %q, want %q", got.Data[BackendsConfKey], tt.want)
			}
			if tt.creates == 1 && !metav1.IsControlledBy(got, s.g) {
				t.Errorf("owner references %v, want the Glance as controller", got.OwnerReferences)
			}
		})
	}
}

// TestEnsureSecretIsStable: the Secret is written when its data differ,
// not when a pass renders the same again; the values are made only for a
// write, and a value edited by hand is noticed and written back.
func TestEnsureSecretIsStable(t *testing.T) {
	s := newApplyScene(t, "")
	s.p.digestKey = bytes.Repeat([]byte{7}, digestKeySize)
	made := 0
	ensure := func(value string) {
		t.Helper()
		want := fixedData(s.p, map[string][]byte{ConnectionKey: []byte(value)})
		values := want.values
		want.values = func(ctx context.Context) (map[string][]byte, error) {
			made++
			return values(ctx)
		}
		if err := ensureSecret(context.Background(), s.p, s.g, "glance-db-connection", componentDatabase, want); err != nil {
			t.Fatal(err)
		}
	}
	ensure("a")
	s.writes.expect(t, 1, 0)
	ensure("a")
	s.writes.expect(t, 1, 0)
	if made != 1 {
		t.Errorf("the values were made %d times for one write", made)
	}
	ensure("b")
	s.writes.expect(t, 1, 1)

	got := &corev1.Secret{}
	if err := s.server.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance-db-connection"}, got); err != nil {
		t.Fatal(err)
	}
	if hash := got.Annotations[AnnotationDataHash]; hash == "" || hash == valuesDigest(nil, got.Data) {
		t.Errorf("data-hash annotation %q, want the digest under the Glance's key", hash)
	}
	got.Data[ConnectionKey] = []byte("edited")
	if err := s.server.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	ensure("b")
	s.writes.expect(t, 1, 2)
	if err := s.server.Get(context.Background(), client.ObjectKeyFromObject(got), got); err != nil {
		t.Fatal(err)
	}
	if got.Type != corev1.SecretTypeOpaque || string(got.Data[ConnectionKey]) != "b" {
		t.Errorf("Secret %s %q, want Opaque holding b", got.Type, got.Data[ConnectionKey])
	}
}

// Values that are not what the pass decided on (credentials changed while
// it ran) are not written.
func TestEnsureSecretRefusesValuesOffTheirDigest(t *testing.T) {
	s := newApplyScene(t, "")
	want := fixedData(s.p, map[string][]byte{ConnectionKey: []byte("decided")})
	want.values = func(context.Context) (map[string][]byte, error) {
		return map[string][]byte{ConnectionKey: []byte("read later")}, nil
	}
	err := ensureSecret(context.Background(), s.p, s.g, "glance-db-connection", componentDatabase, want)
	if !errors.Is(err, errCredentialsChanged) {
		t.Fatalf("error %v, want errCredentialsChanged", err)
	}
	s.writes.expect(t, 0, 0)
}

// fixedData is what ensureSecret is to write: data, digested under the
// pass's key.
func fixedData(p *pass, data map[string][]byte) secretData {
	digests := map[string]string{}
	for k, v := range data {
		digests[k] = keyedDigest(p.digestKey, string(v))
	}
	return secretData{digests: digests, values: func(context.Context) (map[string][]byte, error) { return data, nil }}
}

func TestReadLiveNames(t *testing.T) {
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "staging", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: render.VolumeConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "glance-config-1"}}}},
			{Name: render.VolumeBackends, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "glance-backends-1"}}},
		}}}},
	}
	for _, tt := range []struct {
		name string
		objs []client.Object
		want liveNames
	}{
		{"no Deployment yet", nil, liveNames{}},
		{"mounted", []client.Object{deployment}, liveNames{configMap: "glance-config-1", backendsSecret: "glance-backends-1",
			configMaps: []string{"glance-config-1"}, backendsSecrets: []string{"glance-backends-1"}}},
		{"mounted by an unfinished Job and the purge CronJob", []client.Object{
			deployment,
			mountingJob("glance-db-sync", "glance-config-0", "glance-backends-0", ""),
			mountingJob("glance-db-purge-1", "glance-config-9", "glance-backends-9", batchv1.JobComplete),
			mountingJob("glance-db-purge-2", "glance-config-8", "glance-backends-8", batchv1.JobFailed),
			mountingJob("glance-db-expand", "glance-config-1", "glance-backends-1", ""),
			&batchv1.CronJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-db-purge"},
				Spec:       batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: mountingJob("", "glance-config-2", "glance-backends-2", "").Spec}},
			},
		}, liveNames{configMap: "glance-config-1", backendsSecret: "glance-backends-1",
			configMaps: []string{"glance-config-1", "glance-config-0", "glance-config-2"}, backendsSecrets: []string{"glance-backends-1", "glance-backends-0", "glance-backends-2"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newApplyScene(t, "", tt.objs...)
			got, err := readLiveNames(context.Background(), s.p, s.g)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got.configMaps)
			slices.Sort(got.backendsSecrets)
			slices.Sort(tt.want.configMaps)
			slices.Sort(tt.want.backendsSecrets)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("live names %+v, want %+v", got, tt.want)
			}
		})
	}
}

// mountingJob is a Job of the Glance glance mounting those, finished with
// the condition done unless it is empty.
func mountingJob(name, configMap, backendsSecret string, done batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: name, Labels: render.ChildLabels("glance", "db-sync")},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: render.VolumeConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}},
			{Name: render.VolumeBackends, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: backendsSecret}}},
		}}}},
	}
	if done != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: done, Status: corev1.ConditionTrue}}
	}
	return j
}
