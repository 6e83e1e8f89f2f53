package render

import (
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

func TestImageRef(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name        string
		tag, digest string
		want        string
	}{
		{"tag", "2025.2-1", "", "registry.example.com/openstack/glance:2025.2-1"},
		{"digest", "", digest, "registry.example.com/openstack/glance@" + digest},
		{"digest wins over a tag", "2025.2-1", digest, "registry.example.com/openstack/glance@" + digest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Image.Tag, g.Spec.Image.Digest = tt.tag, tt.digest
			if got := ImageRef(g); got != tt.want {
				t.Errorf("ImageRef = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDeploymentDefaults(t *testing.T) {
	g := minimalGlance()
	d := mustDeployment(t, g, testFacts())

	if d.Name != "glance" || d.Namespace != "openstack" {
		t.Errorf("name %s/%s", d.Namespace, d.Name)
	}
	if !reflect.DeepEqual(d.Labels, APIPodLabels("glance")) {
		t.Errorf("labels %v", d.Labels)
	}
	if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, APIPodLabels("glance")) || !reflect.DeepEqual(d.Spec.Template.Labels, APIPodLabels("glance")) {
		t.Errorf("selector %v, pod labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if got := ptr.Deref(d.Spec.Replicas, 0); got != v1alpha1.DefaultReplicas {
		t.Errorf("replicas %d", got)
	}
	s := d.Spec.Strategy
	if s.Type != appsv1.RollingUpdateDeploymentStrategyType || *s.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) || *s.RollingUpdate.MaxSurge != intstr.FromInt32(1) {
		t.Errorf("strategy %+v", s)
	}
	pod := d.Spec.Template.Spec
	if got := ptr.Deref(pod.TerminationGracePeriodSeconds, 0); got != 30 {
		t.Errorf("terminationGracePeriodSeconds %d", got)
	}
	if pod.PriorityClassName != "" {
		t.Errorf("priorityClassName %q", pod.PriorityClassName)
	}
	if !ptr.Equal(pod.AutomountServiceAccountToken, ptr.To(false)) {
		t.Error("service account token is mounted")
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("containers %v", pod.Containers)
	}
	api := container(t, pod.Containers, ContainerAPI)
	if api.Image != "registry.example.com/openstack/glance:2025.2-20251001" {
		t.Errorf("image %q", api.Image)
	}
	if h := api.Lifecycle.PreStop; h == nil || h.Sleep == nil || h.Sleep.Seconds != 5 || h.Exec != nil {
		t.Errorf("preStop %+v", h)
	}
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse(v1alpha1.DefaultMemoryRequest)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse(v1alpha1.DefaultMemoryLimit)},
	}
	if !reflect.DeepEqual(api.Resources, wantRes) {
		t.Errorf("resources %v", api.Resources)
	}
	if len(api.Ports) != 1 || api.Ports[0].Name != "api" || api.Ports[0].ContainerPort != 9292 {
		t.Errorf("ports %v", api.Ports)
	}
	if got, want := volumeNames(pod.Volumes), []string{VolumeConfig, VolumeBackends, VolumeTmp, VolumeStaging, VolumeTasksWork}; !slices.Equal(got, want) {
		t.Errorf("volumes %v, want %v", got, want)
	}
	wantMounts := map[string]string{
		VolumeConfig: "/etc/glance/glance-api.conf.d/", VolumeBackends: "/etc/glance/backends.conf.d/", VolumeTmp: "/tmp",
		VolumeStaging: "/var/lib/glance/staging", VolumeTasksWork: "/var/lib/glance/tasks-work",
	}
	if len(api.VolumeMounts) != len(wantMounts) {
		t.Errorf("mounts %v", mountNames(api))
	}
	for name, path := range wantMounts {
		if m := mount(api, name); m == nil || m.MountPath != path {
			t.Errorf("mount %s: %+v, want at %s", name, m, path)
		}
	}
	if v := volume(pod.Volumes, VolumeConfig); v.ConfigMap == nil || v.ConfigMap.Name != "glance-config-0123456789" {
		t.Errorf("config volume %+v", v)
	}
	if v := volume(pod.Volumes, VolumeBackends); v.Secret == nil || v.Secret.SecretName != "glance-backends-abcdef0123" || *v.Secret.DefaultMode != 0o440 {
		t.Errorf("backends volume %+v", v)
	}
	for _, name := range []string{VolumeStaging, VolumeTasksWork} {
		if v := volume(pod.Volumes, name); v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("20Gi")) != 0 {
			t.Errorf("%s volume %+v", name, v)
		}
	}
}

func TestDeploymentReplicas(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*v1alpha1.GlanceSpec)
		want   *int32
	}{
		{"absent deployment", func(*v1alpha1.GlanceSpec) {}, ptr.To[int32](3)},
		{"nil replicas", func(s *v1alpha1.GlanceSpec) { s.Deployment = &v1alpha1.GlanceDeploymentSpec{} }, ptr.To[int32](3)},
		{"given", func(s *v1alpha1.GlanceSpec) {
			s.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](7)}
		}, ptr.To[int32](7)},
		{"autoscaling", func(s *v1alpha1.GlanceSpec) {
			s.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 10, TargetCPUUtilization: ptr.To[int32](80)}
		}, nil},
		{"autoscaling with replicas", func(s *v1alpha1.GlanceSpec) {
			s.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](4)}
			s.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 10, TargetCPUUtilization: ptr.To[int32](80)}
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			tt.mutate(&g.Spec)
			d := mustDeployment(t, g, testFacts())
			if !ptr.Equal(d.Spec.Replicas, tt.want) {
				t.Errorf("replicas %v, want %v", ptr.Deref(d.Spec.Replicas, -1), ptr.Deref(tt.want, -1))
			}
		})
	}
}

func TestDeploymentStrategy(t *testing.T) {
	ru := appsv1.RollingUpdateDeploymentStrategyType
	for _, tt := range []struct {
		name  string
		given *appsv1.DeploymentStrategy
		want  appsv1.DeploymentStrategy
	}{
		{"absent", nil, appsv1.DeploymentStrategy{Type: ru, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}}},
		{"type only", &appsv1.DeploymentStrategy{Type: ru}, appsv1.DeploymentStrategy{Type: ru, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}}},
		{"partial rollingUpdate", &appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("50%"))}},
			appsv1.DeploymentStrategy{Type: ru, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("50%"))}}},
		{"recreate drops rollingUpdate", &appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}},
			appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Strategy: tt.given}
			d := mustDeployment(t, g, testFacts())
			if !reflect.DeepEqual(d.Spec.Strategy, tt.want) {
				t.Errorf("strategy %+v, want %+v", d.Spec.Strategy, tt.want)
			}
		})
	}
}

func TestDeploymentTopologySpread(t *testing.T) {
	given := []corev1.TopologySpreadConstraint{{
		MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: "glance"}},
	}}
	for _, tt := range []struct {
		name     string
		given    *[]corev1.TopologySpreadConstraint
		wantKeys []string
	}{
		{"absent", nil, []string{TopologyKeyZone, TopologyKeyHostname}},
		{"empty means none", &[]corev1.TopologySpreadConstraint{}, nil},
		{"given as given", &given, []string{"rack"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{TopologySpreadConstraints: tt.given}
			got := mustDeployment(t, g, testFacts()).Spec.Template.Spec.TopologySpreadConstraints
			var keys []string
			for _, c := range got {
				keys = append(keys, c.TopologyKey)
			}
			if !slices.Equal(keys, tt.wantKeys) {
				t.Fatalf("topology keys %v, want %v", keys, tt.wantKeys)
			}
			if tt.given != nil {
				if len(*tt.given) > 0 && !reflect.DeepEqual(got, *tt.given) {
					t.Errorf("constraints %+v, want as given", got)
				}
				return
			}
			for _, c := range got {
				if c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway || !reflect.DeepEqual(c.LabelSelector.MatchLabels, APIPodLabels("glance")) {
					t.Errorf("default constraint %+v", c)
				}
			}
		})
	}
	// The rendered constraints do not alias the spec.
	g := minimalGlance()
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{TopologySpreadConstraints: &given}
	d := mustDeployment(t, g, testFacts())
	d.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["x"] = "y"
	if _, ok := given[0].LabelSelector.MatchLabels["x"]; ok {
		t.Error("rendered constraints alias the spec")
	}
}

func TestDeploymentStaging(t *testing.T) {
	for _, tt := range []struct {
		name    string
		staging *v1alpha1.StagingSpec
		want    string // "" means no sizeLimit
	}{
		{"absent", nil, "20Gi"},
		{"empty block", &v1alpha1.StagingSpec{}, "20Gi"},
		{"sizeLimit", &v1alpha1.StagingSpec{SizeLimit: ptr.To(resource.MustParse("5Gi"))}, "5Gi"},
		{"unbounded", &v1alpha1.StagingSpec{Unbounded: true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Staging = tt.staging
			pod := mustDeployment(t, g, testFacts()).Spec.Template.Spec
			for _, name := range []string{VolumeStaging, VolumeTasksWork} {
				v := volume(pod.Volumes, name)
				if v == nil || v.EmptyDir == nil {
					t.Fatalf("%s is not an emptyDir: %+v", name, v)
				}
				switch {
				case tt.want == "" && v.EmptyDir.SizeLimit != nil:
					t.Errorf("%s sizeLimit %s, want none", name, v.EmptyDir.SizeLimit)
				case tt.want != "" && (v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse(tt.want)) != 0):
					t.Errorf("%s sizeLimit %v, want %s", name, v.EmptyDir.SizeLimit, tt.want)
				}
			}
		})
	}
}

// TestDeploymentDBTLS checks that every file the DSN names is mounted, in
// every container that receives the DSN.
func TestDeploymentDBTLS(t *testing.T) {
	for _, tt := range []struct {
		name        string
		tls         *v1alpha1.DatabaseTLSSpec
		wantVolumes []string
	}{
		{"none", nil, nil},
		{"disabled with refs", &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSDisabled,
			CABundleSecretRef: &v1alpha1.SecretKeySelector{Name: "ca"}, ClientCertSecretRef: &v1alpha1.LocalObjectReference{Name: "client"}}, nil},
		{"require", &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSRequire}, nil},
		{"require with client cert", &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSRequire,
			ClientCertSecretRef: &v1alpha1.LocalObjectReference{Name: "client"}}, []string{VolumeDBTLSClient}},
		{"verify-ca default key", &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSVerifyCA,
			CABundleSecretRef: &v1alpha1.SecretKeySelector{Name: "ca"}}, []string{VolumeDBTLSCA}},
		{"verify-full custom key and client", &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSVerifyFull,
			CABundleSecretRef:   &v1alpha1.SecretKeySelector{Name: "ca", Key: "bundle.pem"},
			ClientCertSecretRef: &v1alpha1.LocalObjectReference{Name: "client"}}, []string{VolumeDBTLSCA, VolumeDBTLSClient}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Database.TLS = tt.tls
			g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("10Gi")}
			dsn, err := DSN(g, "glance", "pw")
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			var dsnFiles []string
			for _, k := range []string{"ssl_ca", "ssl_cert", "ssl_key"} {
				if v := u.Query().Get(k); v != "" {
					dsnFiles = append(dsnFiles, v)
				}
			}

			check := func(what string, pod *corev1.PodSpec) {
				var tlsVolumes []string
				for _, v := range pod.Volumes {
					if v.Name == VolumeDBTLSCA || v.Name == VolumeDBTLSClient {
						tlsVolumes = append(tlsVolumes, v.Name)
					}
				}
				if !slices.Equal(tlsVolumes, tt.wantVolumes) {
					t.Errorf("%s: TLS volumes %v, want %v", what, tlsVolumes, tt.wantVolumes)
				}
				for _, c := range allContainers(pod) {
					provided := map[string]bool{}
					for _, m := range c.VolumeMounts {
						v := volume(pod.Volumes, m.Name)
						if v == nil || v.Secret == nil {
							continue
						}
						for _, item := range v.Secret.Items {
							provided[strings.TrimSuffix(m.MountPath, "/")+"/"+item.Path] = true
						}
						if m.Name == VolumeDBTLSCA || m.Name == VolumeDBTLSClient {
							if !m.ReadOnly || *v.Secret.DefaultMode != 0o440 {
								t.Errorf("%s/%s: TLS mount %+v, mode %o", what, c.Name, m, *v.Secret.DefaultMode)
							}
						}
					}
					for _, f := range dsnFiles {
						if !provided[f] {
							t.Errorf("%s/%s: DSN names %s, mounted files %v", what, c.Name, f, slices.Sorted(maps.Keys(provided)))
						}
					}
				}
			}
			d := mustDeployment(t, g, testFacts())
			check("Deployment", &d.Spec.Template.Spec)
			for _, kind := range []DatabaseJobKind{DBSync, DBExpand} {
				j, err := DatabaseJob(g, testFacts(), kind, "")
				if err != nil {
					t.Fatal(err)
				}
				check(string(kind), &j.Spec.Template.Spec)
			}
			cj, err := DBPurgeCronJob(g, testFacts())
			if err != nil {
				t.Fatal(err)
			}
			check("CronJob", &cj.Spec.JobTemplate.Spec.Template.Spec)
		})
	}
}

func TestDeploymentAnnotations(t *testing.T) {
	g := minimalGlance()
	f := testFacts()
	d := mustDeployment(t, g, f)
	want := map[string]string{
		"glance.c5c3.io/authtoken-hash":     f.AuthtokenHash,
		"glance.c5c3.io/db-connection-hash": f.DBConnectionHash,
	}
	if !reflect.DeepEqual(d.Spec.Template.Annotations, want) {
		t.Errorf("annotations %v, want %v", d.Spec.Template.Annotations, want)
	}
	rotated := f
	rotated.AuthtokenHash = "other"
	if PodTemplateHash(mustDeployment(t, g, rotated).Spec.Template) == PodTemplateHash(d.Spec.Template) {
		t.Error("a rotated password leaves the pod template unchanged")
	}
	f.AuthtokenHash, f.DBConnectionHash = "", ""
	if a := mustDeployment(t, g, f).Spec.Template.Annotations; a != nil {
		t.Errorf("annotations without hashes: %v", a)
	}
}

func TestDeploymentProbes(t *testing.T) {
	api := container(t, mustDeployment(t, minimalGlance(), testFacts()).Spec.Template.Spec.Containers, ContainerAPI)
	for name, p := range map[string]*corev1.Probe{"startup": api.StartupProbe, "readiness": api.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe %+v", name, p)
			continue
		}
		if p.HTTPGet.Path != "/healthcheck" || p.HTTPGet.Port != intstr.FromString("api") {
			t.Errorf("%s probe GET %s on %s", name, p.HTTPGet.Path, p.HTTPGet.Port.String())
		}
	}
	// Liveness must not restart a pod drained through /healthcheck.
	if l := api.LivenessProbe; l == nil || l.HTTPGet != nil || l.TCPSocket == nil || l.TCPSocket.Port != intstr.FromString("api") {
		t.Errorf("liveness probe %+v, want a TCP check of the api port", l)
	}
	// The named port is 9292.
	if api.Ports[0].ContainerPort != 9292 {
		t.Errorf("port api is %d", api.Ports[0].ContainerPort)
	}
	s := api.StartupProbe
	if budget := s.PeriodSeconds * s.FailureThreshold; budget < 300 {
		t.Errorf("startup allows %ds, want at least 300s", budget)
	}
	if l := api.LivenessProbe; l.PeriodSeconds*l.FailureThreshold < 60 {
		t.Errorf("liveness restarts after %ds", l.PeriodSeconds*l.FailureThreshold)
	}
}

func TestDeploymentPreStopAndGrace(t *testing.T) {
	for _, tt := range []struct {
		name         string
		grace, sleep *int64
		wantGrace    int64
		wantSleep    int64 // 0: no preStop hook
	}{
		{"defaults", nil, nil, 30, 5},
		{"given", ptr.To[int64](90), ptr.To[int64](15), 90, 15},
		{"zero sleep has no hook", nil, ptr.To[int64](0), 30, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{TerminationGracePeriodSeconds: tt.grace, PreStopSleepSeconds: tt.sleep}
			pod := mustDeployment(t, g, testFacts()).Spec.Template.Spec
			if *pod.TerminationGracePeriodSeconds != tt.wantGrace {
				t.Errorf("grace %d", *pod.TerminationGracePeriodSeconds)
			}
			l := container(t, pod.Containers, ContainerAPI).Lifecycle
			switch {
			case tt.wantSleep == 0 && l != nil:
				t.Errorf("lifecycle %+v, want none", l)
			case tt.wantSleep != 0 && (l == nil || l.PreStop.Sleep.Seconds != tt.wantSleep):
				t.Errorf("lifecycle %+v, want sleep %d", l, tt.wantSleep)
			}
		})
	}
}

func TestDeploymentResourcesAndPriorityClass(t *testing.T) {
	g := uwsgiEveryKnobGlance()
	pod := mustDeployment(t, g, testFacts()).Spec.Template.Spec
	if pod.PriorityClassName != "openstack-critical" {
		t.Errorf("priorityClassName %q", pod.PriorityClassName)
	}
	api := container(t, pod.Containers, ContainerAPI)
	if !reflect.DeepEqual(api.Resources, g.Spec.Deployment.Resources) {
		t.Errorf("resources %v, want as given", api.Resources)
	}
	// Limits alone are a given value, not "empty".
	g = minimalGlance()
	only := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Resources: only}
	api = container(t, mustDeployment(t, g, testFacts()).Spec.Template.Spec.Containers, ContainerAPI)
	if !reflect.DeepEqual(api.Resources, only) {
		t.Errorf("resources %v, want only the given limits", api.Resources)
	}
}

func TestDeploymentImageCache(t *testing.T) {
	g := imageCacheGlance()
	files, err := ConfigFiles(g, ConfigFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(CacheMaintenanceScriptPath, ConfigDir) || files[strings.TrimPrefix(CacheMaintenanceScriptPath, ConfigDir)] == "" {
		t.Fatalf("the config ConfigMap has no %s", CacheMaintenanceScriptPath)
	}
	if _, ok := mustConfigFiles(t, minimalGlance())[CacheMaintenanceScriptKey]; ok {
		t.Error("the script is rendered without imageCache")
	}

	pod := mustDeployment(t, g, testFacts()).Spec.Template.Spec
	if v := volume(pod.Volumes, VolumeImageCache); v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("50Gi")) != 0 {
		t.Errorf("image-cache volume %+v", v)
	}
	api := container(t, pod.Containers, ContainerAPI)
	if m := mount(api, VolumeImageCache); m == nil || m.MountPath != ImageCacheDir {
		t.Errorf("glance-api image-cache mount %+v", m)
	}
	side := container(t, pod.Containers, ContainerCacheMaintenance)
	if side.Image != api.Image {
		t.Errorf("sidecar image %q, glance-api %q", side.Image, api.Image)
	}
	if want := []string{"/bin/sh", "/etc/glance/glance-api.conf.d/cache-maintenance.sh"}; !slices.Equal(side.Command, want) {
		t.Errorf("sidecar command %q", side.Command)
	}
	if got, want := mountNames(side), []string{VolumeConfig, VolumeBackends, VolumeTmp, VolumeImageCache}; !slices.Equal(got, want) {
		t.Errorf("sidecar mounts %v, want %v", got, want)
	}
	if m := mount(side, VolumeImageCache); m.MountPath != ImageCacheDir || m.ReadOnly {
		t.Errorf("sidecar image-cache mount %+v", m)
	}
	if !reflect.DeepEqual(side.Env, envWithoutSelfReference(api)) {
		t.Errorf("sidecar env %v, glance-api %v", side.Env, api.Env)
	}
	if side.Resources.Limits.Memory().Cmp(resource.MustParse("512Mi")) > 0 || side.Resources.Requests.Cpu().Cmp(resource.MustParse("100m")) > 0 {
		t.Errorf("sidecar resources %v are not small", side.Resources)
	}
	if side.LivenessProbe != nil || side.Lifecycle != nil || len(side.Ports) != 0 {
		t.Errorf("sidecar has probes, hooks or ports: %+v", side)
	}
}

func mustConfigFiles(t *testing.T, g *v1alpha1.Glance) map[string]string {
	t.Helper()
	files, err := ConfigFiles(g, ConfigFacts{})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSecurityContext checks the restricted profile on every pod and
// container the package renders.
func TestSecurityContext(t *testing.T) {
	g := tlsDatabaseGlance()
	g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("1Gi")}
	pods := map[string]*corev1.PodSpec{}
	d := mustDeployment(t, g, testFacts())
	pods["Deployment"] = &d.Spec.Template.Spec
	for _, kind := range []DatabaseJobKind{DBSync, DBExpand, DBMigrate, DBContract} {
		j, err := DatabaseJob(g, testFacts(), kind, "")
		if err != nil {
			t.Fatal(err)
		}
		pods[string(kind)] = &j.Spec.Template.Spec
	}
	cj, err := DBPurgeCronJob(g, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	pods["CronJob"] = &cj.Spec.JobTemplate.Spec.Template.Spec

	for what, pod := range pods {
		psc := pod.SecurityContext
		if psc == nil || !ptr.Equal(psc.RunAsNonRoot, ptr.To(true)) || !ptr.Equal(psc.RunAsUser, ptr.To[int64](42424)) ||
			!ptr.Equal(psc.RunAsGroup, ptr.To[int64](42424)) || !ptr.Equal(psc.FSGroup, ptr.To[int64](42424)) ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod security context %+v", what, psc)
		}
		if !ptr.Equal(pod.AutomountServiceAccountToken, ptr.To(false)) {
			t.Errorf("%s: service account token mounted", what)
		}
		for _, c := range allContainers(pod) {
			sc := c.SecurityContext
			if sc == nil || !ptr.Equal(sc.ReadOnlyRootFilesystem, ptr.To(true)) || !ptr.Equal(sc.AllowPrivilegeEscalation, ptr.To(false)) ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
				sc.Privileged != nil {
				t.Errorf("%s/%s: container security context %+v", what, c.Name, sc)
			}
			if m := mount(&c, VolumeTmp); m == nil || m.MountPath != "/tmp" {
				t.Errorf("%s/%s: no writable /tmp", what, c.Name)
			}
			// The env of every container that runs glance code: no
			// service user from the Secret unless the spec names its key.
			wantEnv := []corev1.EnvVar{
				secretEnv("OS_DATABASE__CONNECTION", "glance-db-connection", "connection"),
				secretEnv("OS_KEYSTONE_AUTHTOKEN__PASSWORD", "glance-service-user", "password"),
			}
			if what == "Deployment" && c.Name == ContainerAPI {
				wantEnv = append(wantEnv, wantSelfReferenceEnv("http://$(GLANCE_POD_IP):9292")...)
			}
			if !reflect.DeepEqual(c.Env, wantEnv) {
				t.Errorf("%s/%s: env %+v", what, c.Name, c.Env)
			}
		}
	}
}

// TestDeploymentWorkerSelfReferenceURL: glance-api, and no other
// container, advertises its pod's own address as worker_self_reference_url
// through oslo.config's environment source, the pod IP bracketed when the
// pods' family is IPv6.
func TestDeploymentWorkerSelfReferenceURL(t *testing.T) {
	for _, tc := range []struct {
		family corev1.IPFamily
		want   string
	}{
		{"", "http://$(GLANCE_POD_IP):9292"},
		{corev1.IPv4Protocol, "http://$(GLANCE_POD_IP):9292"},
		{corev1.IPv6Protocol, "http://[$(GLANCE_POD_IP)]:9292"},
	} {
		for _, g := range []*v1alpha1.Glance{minimalGlance(), uwsgiEveryKnobGlance(), imageCacheGlance()} {
			facts := testFacts()
			facts.PodIPFamily = tc.family
			pod := mustDeployment(t, g, facts).Spec.Template.Spec
			api := container(t, pod.Containers, ContainerAPI)
			// The variable the URL expands is defined before it, or the
			// kubelet would leave "$(GLANCE_POD_IP)" in place.
			if got := api.Env[len(api.Env)-2:]; !reflect.DeepEqual(got, wantSelfReferenceEnv(tc.want)) {
				t.Errorf("%s, family %q: glance-api env ends in %+v, want %s", g.Spec.OpenStackRelease, tc.family, got, tc.want)
			}
			for _, c := range pod.Containers {
				if c.Name != ContainerAPI && len(envWithoutSelfReference(&c)) != len(c.Env) {
					t.Errorf("container %s has the API's own address: %+v", c.Name, c.Env)
				}
			}
		}
	}
}

// wantSelfReferenceEnv is the env that gives glance-api url as its
// worker_self_reference_url.
func wantSelfReferenceEnv(url string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "GLANCE_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		{Name: "OS_DEFAULT__WORKER_SELF_REFERENCE_URL", Value: url},
	}
}

func TestServiceUserPasswordKey(t *testing.T) {
	g := minimalGlance()
	g.Spec.ServiceUser.SecretRef = v1alpha1.SecretKeySelector{Name: "svc", Key: "pw"}
	api := container(t, mustDeployment(t, g, testFacts()).Spec.Template.Spec.Containers, ContainerAPI)
	ref := api.Env[1].ValueFrom.SecretKeyRef
	if api.Env[1].Name != EnvAuthtokenPassword || ref.Name != "svc" || ref.Key != "pw" {
		t.Errorf("env %+v", api.Env[1])
	}
}

// TestServiceUserUsernameKey: the Secret names the service user only when
// spec.serviceUser.usernameKey says which key holds it, and then in every
// container that runs glance code, as a required key: a pod that cannot read
// it must not start as the config's user.
func TestServiceUserUsernameKey(t *testing.T) {
	g := minimalGlance()
	g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("1Gi")}
	if env := envNamed(mustDeployment(t, g, testFacts()).Spec.Template.Spec.Containers, EnvAuthtokenUsername); len(env) != 0 {
		t.Fatalf("no usernameKey, yet %s is rendered: %+v", EnvAuthtokenUsername, env)
	}
	g.Spec.ServiceUser.UsernameKey = "user"
	want := secretEnv(EnvAuthtokenUsername, "glance-service-user", "user")
	d := mustDeployment(t, g, testFacts())
	j, err := DatabaseJob(g, testFacts(), DBSync, "")
	if err != nil {
		t.Fatal(err)
	}
	cj, err := DBPurgeCronJob(g, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	for what, pod := range map[string]corev1.PodSpec{"Deployment": d.Spec.Template.Spec, "db-sync": j.Spec.Template.Spec, "CronJob": cj.Spec.JobTemplate.Spec.Template.Spec} {
		containers := slices.Concat(pod.InitContainers, pod.Containers)
		env := envNamed(containers, EnvAuthtokenUsername)
		if len(env) != len(containers) {
			t.Errorf("%s: %s in %d of %d containers", what, EnvAuthtokenUsername, len(env), len(containers))
		}
		for _, e := range env {
			if !reflect.DeepEqual(e, want) {
				t.Errorf("%s: %+v, want %+v", what, e, want)
			}
		}
	}
}

// envNamed is every env var called name in the containers.
func envNamed(containers []corev1.Container, name string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, c := range containers {
		for _, e := range c.Env {
			if e.Name == name {
				out = append(out, e)
			}
		}
	}
	return out
}

func TestAPICommand(t *testing.T) {
	eventlet := []string{"glance-api", "--config-dir", "/etc/glance/glance-api.conf.d/", "--config-dir", "/etc/glance/backends.conf.d/"}
	pyargv := "--config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/"
	// Conformance (test/conformance, the glance-direct import after a
	// chunked stage): a chunked request body puts uWSGI's router in raw
	// mode and it drops the kept-alive connection without saying so; the
	// client's next POST on it was reset.
	closeAfterChunked := "equal:${HTTP_TRANSFER_ENCODING};chunked addheader:Connection: close"
	keepAlive := func(flag string) []string { return []string{flag, "--route-if", closeAfterChunked} }
	noKeepAlive := []string{"--add-header", "Connection: close"}
	uwsgi := func(keepalive []string, processes, threads string, tail ...string) []string {
		cmd := append([]string{"uwsgi", "--http", ":9292", "--http-auto-chunked", "--http-chunked-input"}, keepalive...)
		cmd = append(cmd, "--wsgi-file", "/var/lib/openstack/bin/glance-wsgi-api", "--master", "--lazy-apps", "--need-app",
			"--enable-threads", "--die-on-term", "--processes", processes, "--threads", threads, "--pyargv", pyargv)
		return append(cmd, tail...)
	}
	for _, tt := range []struct {
		name    string
		release string
		uwsgi   *v1alpha1.UWSGISpec
		want    []string
		wantErr string
	}{
		{"eventlet", "2025.2", nil, eventlet, ""},
		{"eventlet ignores uwsgi knobs", "2025.1", &v1alpha1.UWSGISpec{Processes: ptr.To[int32](9)}, eventlet, ""},
		{"unparseable falls back to eventlet", "next", nil, eventlet, ""},
		{"uwsgi defaults", "2026.1", nil, uwsgi(keepAlive("--http-keepalive"), "2", "1"), ""},
		{"uwsgi every knob", "2026.2", &v1alpha1.UWSGISpec{
			Processes: ptr.To[int32](4), Threads: ptr.To[int32](8), HTTPKeepAlive: ptr.To(true),
			HTTPKeepAliveTimeout: ptr.To[int32](15), Harakiri: ptr.To[int32](20),
		}, uwsgi(keepAlive("--http-keepalive=15"), "4", "8", "--harakiri", "20"), ""},
		// Conformance (test/conformance): uWSGI 2.0 has no
		// --http-keepalive-timeout and refuses to start with it; the idle
		// timeout is the value of --http-keepalive, in the same argv
		// element, and 1 there means the 60s socket timeout.
		{"keep-alive timeout is the value of --http-keepalive", "2026.1", &v1alpha1.UWSGISpec{
			HTTPKeepAliveTimeout: ptr.To[int32](30),
		}, uwsgi(keepAlive("--http-keepalive=30"), "2", "1"), ""},
		{"keep-alive timeout 1 is rendered as uWSGI's shortest, 2", "2026.1", &v1alpha1.UWSGISpec{
			HTTPKeepAliveTimeout: ptr.To[int32](1),
		}, uwsgi(keepAlive("--http-keepalive=2"), "2", "1"), ""},
		// Conformance: without keep-alive uWSGI's router closes every
		// connection after the response yet answers HTTP/1.1 without
		// "Connection: close", so clients reuse the dead connection.
		{"keep-alive off drops its timeout and announces the close", "2026.1", &v1alpha1.UWSGISpec{
			HTTPKeepAlive: ptr.To(false), HTTPKeepAliveTimeout: ptr.To[int32](15),
		}, uwsgi(noKeepAlive, "2", "1"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.OpenStackRelease = tt.release
			g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: tt.uwsgi}
			got, err := APICommand(g)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				if _, err := Deployment(g, testFacts()); err == nil {
					t.Error("Deployment accepts it")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("command\n got %q\nwant %q", got, tt.want)
			}
			api := container(t, mustDeployment(t, g, testFacts()).Spec.Template.Spec.Containers, ContainerAPI)
			if !slices.Equal(api.Command, tt.want) || len(api.Args) != 0 {
				t.Errorf("container command %q args %q", api.Command, api.Args)
			}
		})
	}
}

func TestDeploymentErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		mutate  func(*v1alpha1.Glance, *WorkloadFacts)
		wantErr string
	}{
		{"no config ConfigMap", func(_ *v1alpha1.Glance, f *WorkloadFacts) { f.ConfigMapName = "" }, "config ConfigMap"},
		{"no backends Secret", func(_ *v1alpha1.Glance, f *WorkloadFacts) { f.BackendsSecretName = "" }, "backends Secret"},
		{"no service user Secret", func(g *v1alpha1.Glance, _ *WorkloadFacts) { g.Spec.ServiceUser.SecretRef.Name = "" }, "serviceUser"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, f := minimalGlance(), testFacts()
			tt.mutate(g, &f)
			if _, err := Deployment(g, f); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestService(t *testing.T) {
	s := Service(minimalGlance())
	if s.Name != "glance" || s.Namespace != "openstack" || !reflect.DeepEqual(s.Labels, APIPodLabels("glance")) {
		t.Errorf("meta %+v", s.ObjectMeta)
	}
	if s.Spec.Type != corev1.ServiceTypeClusterIP || !reflect.DeepEqual(s.Spec.Selector, APIPodLabels("glance")) {
		t.Errorf("spec %+v", s.Spec)
	}
	want := []corev1.ServicePort{{Name: "api", Protocol: corev1.ProtocolTCP, Port: 9292, TargetPort: intstr.FromString("api")}}
	if !reflect.DeepEqual(s.Spec.Ports, want) {
		t.Errorf("ports %+v", s.Spec.Ports)
	}
	// The target port exists on the pods.
	api := container(t, mustDeployment(t, minimalGlance(), testFacts()).Spec.Template.Spec.Containers, ContainerAPI)
	if api.Ports[0].Name != s.Spec.Ports[0].TargetPort.StrVal {
		t.Errorf("Service targets %s, container port is %s", s.Spec.Ports[0].TargetPort.StrVal, api.Ports[0].Name)
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	minAvailable1 := ptr.To(intstr.FromInt32(1))
	for _, tt := range []struct {
		name                     string
		replicas, minReplicas    *int32
		autoscaling              bool
		wantMinAvail, wantMaxUna *intstr.IntOrString
	}{
		{"default 3 replicas", nil, nil, false, minAvailable1, nil},
		{"1 replica", ptr.To[int32](1), nil, false, nil, minAvailable1},
		{"2 replicas", ptr.To[int32](2), nil, false, minAvailable1, nil},
		{"autoscaling min defaults to replicas 1", ptr.To[int32](1), nil, true, nil, minAvailable1},
		{"autoscaling min defaults to default replicas", nil, nil, true, minAvailable1, nil},
		{"autoscaling min 1 over replicas 3", ptr.To[int32](3), ptr.To[int32](1), true, nil, minAvailable1},
		{"autoscaling min 2 over replicas 1", ptr.To[int32](1), ptr.To[int32](2), true, minAvailable1, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: tt.replicas}
			if tt.autoscaling {
				g.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: tt.minReplicas, MaxReplicas: 10, TargetCPUUtilization: ptr.To[int32](70)}
			}
			p := PodDisruptionBudget(g)
			if !reflect.DeepEqual(p.Spec.MinAvailable, tt.wantMinAvail) || !reflect.DeepEqual(p.Spec.MaxUnavailable, tt.wantMaxUna) {
				t.Errorf("minAvailable %v maxUnavailable %v", p.Spec.MinAvailable, p.Spec.MaxUnavailable)
			}
			if p.Name != "glance" || !reflect.DeepEqual(p.Labels, APIPodLabels("glance")) || !reflect.DeepEqual(p.Spec.Selector.MatchLabels, APIPodLabels("glance")) {
				t.Errorf("meta %+v selector %+v", p.ObjectMeta, p.Spec.Selector)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name    string
		gateway *v1alpha1.GatewaySpec
		domain  string
		want    string
	}{
		{"cluster-local", nil, DefaultClusterDomain, "http://glance.openstack.svc.cluster.local:9292/"},
		{"another cluster domain", nil, "region-two.internal", "http://glance.openstack.svc.region-two.internal:9292/"},
		{"gateway default path", &v1alpha1.GatewaySpec{Hostname: "image.example.com"}, DefaultClusterDomain, "https://image.example.com/"},
		{"gateway root path", &v1alpha1.GatewaySpec{Hostname: "image.example.com", Path: "/"}, DefaultClusterDomain, "https://image.example.com/"},
		{"gateway path gets a trailing slash", &v1alpha1.GatewaySpec{Hostname: "api.example.com", Path: "/image"}, DefaultClusterDomain, "https://api.example.com/image/"},
		{"gateway path with a trailing slash", &v1alpha1.GatewaySpec{Hostname: "api.example.com", Path: "/image/"}, "region-two.internal", "https://api.example.com/image/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			g.Spec.Gateway = tt.gateway
			if got := Endpoint(g, tt.domain); got != tt.want {
				t.Errorf("Endpoint = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBuildersDoNotAliasSpec guards the reconciler's CR: mutating rendered
// objects must not write through to the spec.
func TestBuildersDoNotAliasSpec(t *testing.T) {
	g := uwsgiEveryKnobGlance()
	g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("10Gi")}
	before := g.DeepCopy()
	d := mustDeployment(t, g, testFacts())
	d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(9))
	api := &d.Spec.Template.Spec.Containers[0]
	api.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	volume(d.Spec.Template.Spec.Volumes, VolumeStaging).EmptyDir.SizeLimit.Add(resource.MustParse("1Gi"))
	volume(d.Spec.Template.Spec.Volumes, VolumeImageCache).EmptyDir.SizeLimit.Add(resource.MustParse("1Gi"))
	if !reflect.DeepEqual(g, before) {
		t.Error("mutating the Deployment changed the Glance")
	}
}
