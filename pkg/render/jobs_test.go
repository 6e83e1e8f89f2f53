package render

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

func TestDatabaseJob(t *testing.T) {
	manage := func(args ...string) []string {
		return append([]string{"glance-manage", "--config-dir", "/etc/glance/glance-api.conf.d/", "--config-dir", "/etc/glance/backends.conf.d/"}, args...)
	}
	const newImage = "registry.example.com/openstack/glance:2026.1-20260301"
	for _, tt := range []struct {
		kind      DatabaseJobKind
		image     string
		wantName  string
		wantImage string
		wantInit  [][]string
		wantMain  [][]string
	}{
		{DBSync, "", "glance-db-sync", "registry.example.com/openstack/glance:2025.2-20251001",
			[][]string{manage("db", "sync")}, [][]string{manage("db", "load_metadefs")}},
		{DBExpand, newImage, "glance-db-expand", newImage, nil, [][]string{manage("db", "expand")}},
		{DBMigrate, newImage, "glance-db-migrate", newImage, nil, [][]string{manage("db", "migrate")}},
		{DBContract, newImage, "glance-db-contract", newImage, nil, [][]string{manage("db", "contract")}},
	} {
		t.Run(string(tt.kind), func(t *testing.T) {
			g := tlsDatabaseGlance()
			j, err := DatabaseJob(g, testFacts(), tt.kind, tt.image)
			if err != nil {
				t.Fatal(err)
			}
			if j.Name != tt.wantName || j.Namespace != "openstack" {
				t.Errorf("name %s/%s", j.Namespace, j.Name)
			}
			wantLabels := CommonLabels("glance")
			wantLabels[LabelComponent] = string(tt.kind)
			if !reflect.DeepEqual(j.Labels, wantLabels) || !reflect.DeepEqual(j.Spec.Template.Labels, wantLabels) {
				t.Errorf("labels %v, pod labels %v", j.Labels, j.Spec.Template.Labels)
			}
			if j.Spec.Template.Labels[LabelComponent] == ComponentAPI {
				t.Error("the Service would select the Job's pods")
			}
			if j.Spec.TTLSecondsAfterFinished != nil {
				t.Error("the Job has a TTL")
			}
			if b := ptr.Deref(j.Spec.BackoffLimit, -1); b < 0 || b > 6 {
				t.Errorf("backoffLimit %d", b)
			}
			if got := j.Annotations[AnnotationPodTemplateHash]; got == "" || got != PodTemplateHash(j.Spec.Template) {
				t.Errorf("pod-template-hash annotation %q, hash %q", got, PodTemplateHash(j.Spec.Template))
			}
			pod := j.Spec.Template.Spec
			if pod.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restartPolicy %s", pod.RestartPolicy)
			}
			commands := func(cs []corev1.Container) [][]string {
				var out [][]string
				for _, c := range cs {
					out = append(out, c.Command)
					if c.Image != tt.wantImage {
						t.Errorf("%s image %q, want %q", c.Name, c.Image, tt.wantImage)
					}
				}
				return out
			}
			if got := commands(pod.InitContainers); !reflect.DeepEqual(got, tt.wantInit) {
				t.Errorf("init commands %q, want %q", got, tt.wantInit)
			}
			if got := commands(pod.Containers); !reflect.DeepEqual(got, tt.wantMain) {
				t.Errorf("main commands %q, want %q", got, tt.wantMain)
			}

			// Mounts, env and security context are the glance-api container's,
			// minus the API's scratch volumes and its own address.
			api := container(t, mustDeployment(t, g, testFacts()).Spec.Template.Spec.Containers, ContainerAPI)
			var apiMounts []corev1.VolumeMount
			for _, m := range api.VolumeMounts {
				if m.Name != VolumeStaging && m.Name != VolumeTasksWork {
					apiMounts = append(apiMounts, m)
				}
			}
			for _, c := range allContainers(&pod) {
				if !reflect.DeepEqual(c.VolumeMounts, apiMounts) {
					t.Errorf("%s mounts %v, glance-api %v", c.Name, mountNames(&c), apiMounts)
				}
				if !reflect.DeepEqual(c.Env, envWithoutSelfReference(api)) || !reflect.DeepEqual(c.SecurityContext, api.SecurityContext) {
					t.Errorf("%s env or security context differ from glance-api", c.Name)
				}
			}
			if got, want := volumeNames(pod.Volumes), []string{VolumeConfig, VolumeBackends, VolumeTmp, VolumeDBTLSCA, VolumeDBTLSClient}; !slices.Equal(got, want) {
				t.Errorf("volumes %v, want %v", got, want)
			}
		})
	}
}

func TestDatabaseJobTemplateHash(t *testing.T) {
	g := minimalGlance()
	render := func(g *v1alpha1.Glance, f WorkloadFacts, image string) string {
		j, err := DatabaseJob(g, f, DBSync, image)
		if err != nil {
			t.Fatal(err)
		}
		return j.Annotations[AnnotationPodTemplateHash]
	}
	base := render(g, testFacts(), "")
	if again := render(g, testFacts(), ""); again != base {
		t.Errorf("hash not stable: %s, %s", base, again)
	}
	if render(g, testFacts(), ImageRef(g)) != base {
		t.Error("an empty image is not ImageRef")
	}
	rotated := testFacts()
	rotated.AuthtokenHash, rotated.DBConnectionHash = "x", "y"
	if render(g, rotated, "") != base {
		t.Error("a credential rotation changes the Job template")
	}
	if render(g, testFacts(), "other/glance:2026.1") == base {
		t.Error("another image keeps the hash")
	}
	newConfig := testFacts()
	newConfig.ConfigMapName = "glance-config-ffffffffff"
	if render(g, newConfig, "") == base {
		t.Error("another config keeps the hash")
	}
}

func TestDatabaseJobErrors(t *testing.T) {
	if _, err := DatabaseJob(minimalGlance(), testFacts(), "db-upgrade", ""); err == nil || !strings.Contains(err.Error(), "db-upgrade") {
		t.Errorf("unknown kind: %v", err)
	}
	f := testFacts()
	f.BackendsSecretName = ""
	if _, err := DatabaseJob(minimalGlance(), f, DBSync, ""); err == nil {
		t.Error("no backends Secret accepted")
	}
	// An explicit image does not need spec.image.
	g := minimalGlance()
	g.Spec.Image.Tag = ""
	if _, err := DatabaseJob(g, testFacts(), DBExpand, "glance:2026.1"); err != nil {
		t.Error(err)
	}
}

func TestPodTemplateHash(t *testing.T) {
	a := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "x"}}}}
	a.Labels = map[string]string{"k1": "v", "k2": "v", "k3": "v"}
	b := *a.DeepCopy()
	b.Labels = map[string]string{"k3": "v", "k2": "v", "k1": "v"}
	if PodTemplateHash(a) != PodTemplateHash(b) {
		t.Error("map order changes the hash")
	}
	if h := PodTemplateHash(a); len(h) != 10 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Errorf("hash %q is not 10 hex characters", h)
	}
	b.Spec.Containers[0].Image = "y"
	if PodTemplateHash(a) == PodTemplateHash(b) {
		t.Error("a different image gives the same hash")
	}
}

func TestDBPurgeCronJob(t *testing.T) {
	manage := func(age, rows string) []string {
		return []string{"glance-manage", "--config-dir", "/etc/glance/glance-api.conf.d/", "--config-dir", "/etc/glance/backends.conf.d/",
			"db", "purge", "--age_in_days", age, "--max_rows", rows}
	}
	for _, tt := range []struct {
		name                      string
		purge                     *v1alpha1.DBPurgeSpec
		wantSchedule              string
		wantSuspend               bool
		wantCommand               []string
		wantDeadline              int64
		wantSucceeded, wantFailed int32
	}{
		{"absent", nil, "0 3 * * *", false, manage("30", "100"), 3600, 3, 3},
		{"empty block", &v1alpha1.DBPurgeSpec{}, "0 3 * * *", false, manage("30", "100"), 3600, 3, 3},
		{"given", &v1alpha1.DBPurgeSpec{
			Schedule: "*/15 * * * *", Suspend: ptr.To(true), AgeInDays: ptr.To[int32](7), MaxRows: ptr.To[int32](5000),
			ActiveDeadlineSeconds: ptr.To[int64](600), SuccessfulJobsHistoryLimit: ptr.To[int32](1), FailedJobsHistoryLimit: ptr.To[int32](5),
		}, "*/15 * * * *", true, manage("7", "5000"), 600, 1, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.DBPurge = tt.purge
			cj, err := DBPurgeCronJob(g, testFacts())
			if err != nil {
				t.Fatal(err)
			}
			if cj.Name != "glance-db-purge" || cj.Namespace != "openstack" {
				t.Errorf("name %s/%s", cj.Namespace, cj.Name)
			}
			s := cj.Spec
			if s.Schedule != tt.wantSchedule || *s.Suspend != tt.wantSuspend || s.ConcurrencyPolicy != batchv1.ForbidConcurrent ||
				*s.SuccessfulJobsHistoryLimit != tt.wantSucceeded || *s.FailedJobsHistoryLimit != tt.wantFailed {
				t.Errorf("spec %+v", s)
			}
			js := s.JobTemplate.Spec
			if ptr.Deref(js.ActiveDeadlineSeconds, 0) != tt.wantDeadline || js.TTLSecondsAfterFinished != nil {
				t.Errorf("job spec deadline %v ttl %v", js.ActiveDeadlineSeconds, js.TTLSecondsAfterFinished)
			}
			// The spawned Jobs and their pods carry CommonLabels.
			for what, labels := range map[string]map[string]string{"CronJob": cj.Labels, "Job": s.JobTemplate.Labels, "pod": js.Template.Labels} {
				for k, v := range CommonLabels("glance") {
					if labels[k] != v {
						t.Errorf("%s label %s=%q, want %q", what, k, labels[k], v)
					}
				}
				if labels[LabelComponent] != ComponentDBPurge {
					t.Errorf("%s component %q", what, labels[LabelComponent])
				}
			}
			pod := js.Template.Spec
			if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.InitContainers) != 0 || len(pod.Containers) != 1 {
				t.Fatalf("pod %+v", pod)
			}
			c := pod.Containers[0]
			if !slices.Equal(c.Command, tt.wantCommand) || c.Image != ImageRef(g) {
				t.Errorf("command %q image %q", c.Command, c.Image)
			}
			j, err := DatabaseJob(g, testFacts(), DBSync, "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.Volumes, j.Spec.Template.Spec.Volumes) || !reflect.DeepEqual(c.VolumeMounts, j.Spec.Template.Spec.Containers[0].VolumeMounts) {
				t.Error("the purge pod mounts differ from the db-sync pod")
			}
		})
	}
}

func TestDBPurgeCronJobErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		purge   v1alpha1.DBPurgeSpec
		wantErr string
	}{
		{"bad schedule", v1alpha1.DBPurgeSpec{Schedule: "every night"}, "schedule"},
		{"zero age", v1alpha1.DBPurgeSpec{AgeInDays: ptr.To[int32](0)}, "ageInDays"},
		{"zero rows", v1alpha1.DBPurgeSpec{MaxRows: ptr.To[int32](0)}, "maxRows"},
		{"zero deadline", v1alpha1.DBPurgeSpec{ActiveDeadlineSeconds: ptr.To[int64](0)}, "activeDeadlineSeconds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.DBPurge = &tt.purge
			if _, err := DBPurgeCronJob(g, testFacts()); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestLabelsAreCommon checks that every rendered object carries
// CommonLabels plus a component.
func TestLabelsAreCommon(t *testing.T) {
	g := minimalGlance()
	objs := map[string]map[string]string{}
	d := mustDeployment(t, g, testFacts())
	objs["Deployment"] = d.Labels
	objs["Service"] = Service(g).Labels
	objs["PDB"] = PodDisruptionBudget(g).Labels
	cj, err := DBPurgeCronJob(g, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	objs["CronJob"] = cj.Labels
	for _, kind := range []DatabaseJobKind{DBSync, DBExpand, DBMigrate, DBContract} {
		j, err := DatabaseJob(g, testFacts(), kind, "")
		if err != nil {
			t.Fatal(err)
		}
		objs[string(kind)] = j.Labels
	}
	for what, labels := range objs {
		common := CommonLabels("glance")
		if got := maps.Clone(labels); got[LabelComponent] == "" {
			t.Errorf("%s has no component", what)
		} else {
			delete(got, LabelComponent)
			if !reflect.DeepEqual(got, common) {
				t.Errorf("%s labels %v", what, labels)
			}
		}
	}
}
