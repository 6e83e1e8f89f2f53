package render

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
)

// Container and port names of the API pods.
const (
	ContainerAPI              = "glance-api"
	ContainerCacheMaintenance = "cache-maintenance"
	// PortNameAPI names the container port and the Service port; the
	// Service targets it by name.
	PortNameAPI = "api"
	// HealthcheckPath is served by the paste app:healthcheck.
	HealthcheckPath = "/healthcheck"
	// WSGIFile is the image-shipped WSGI shim uWSGI loads; it reads the
	// --config-dir roots from --pyargv.
	WSGIFile = "/var/lib/openstack/bin/glance-wsgi-api"
)

// Topology keys of the default spread constraints.
const (
	TopologyKeyZone     = "topology.kubernetes.io/zone"
	TopologyKeyHostname = "kubernetes.io/hostname"
)

// The cache-maintenance sidecar mostly sleeps; a run starts one Python
// process, hence a memory limit above a shell's needs.
var cacheMaintenanceResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("200m"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	},
}

// Deployment is the glance-api Deployment {name}.
func Deployment(g *v1alpha1.Glance, f WorkloadFacts) (*appsv1.Deployment, error) {
	if err := checkGlanceInputs(g, f); err != nil {
		return nil, err
	}
	command, err := APICommand(g)
	if err != nil {
		return nil, err
	}
	strategy, stagingLimit := deploymentStrategy(g), stagingSizeLimit(g)
	d := g.Spec.Deployment
	if d == nil {
		d = &v1alpha1.GlanceDeploymentSpec{}
	}
	grace := ptr.Deref(d.TerminationGracePeriodSeconds, v1alpha1.DefaultTerminationGracePeriodSeconds)
	// preStop < grace and preStop >= 0 are the CRD's rules.
	preStop := ptr.Deref(d.PreStopSleepSeconds, v1alpha1.DefaultPreStopSleepSeconds)

	image := ImageRef(g)
	api := glanceContainer(g, ContainerAPI, image, command,
		corev1.VolumeMount{Name: VolumeStaging, MountPath: StagingDir},
		corev1.VolumeMount{Name: VolumeTasksWork, MountPath: TasksWorkDir},
	)
	api.Env = append(api.Env, workerSelfReferenceEnv(f.PodIPFamily)...)
	api.Ports = []corev1.ContainerPort{{Name: PortNameAPI, ContainerPort: v1alpha1.APIPort, Protocol: corev1.ProtocolTCP}}
	api.Resources = apiResources(g)
	api.StartupProbe, api.ReadinessProbe, api.LivenessProbe = apiProbes()
	if preStop > 0 {
		// The sleep action needs no shell in the image; it lets endpoints
		// and gateways stop routing here before SIGTERM arrives.
		api.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStop}}}
	}

	pod := glancePodSpec(g, f)
	pod.Volumes = append(pod.Volumes, emptyDir(VolumeStaging, stagingLimit), emptyDir(VolumeTasksWork, stagingLimit))
	pod.Containers = []corev1.Container{api}
	if c := g.Spec.ImageCache; c != nil {
		cacheMount := corev1.VolumeMount{Name: VolumeImageCache, MountPath: ImageCacheDir}
		pod.Volumes = append(pod.Volumes, emptyDir(VolumeImageCache, &c.Size))
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, cacheMount)
		sidecar := glanceContainer(g, ContainerCacheMaintenance, image, []string{"/bin/sh", CacheMaintenanceScriptPath}, cacheMount)
		sidecar.Resources = *cacheMaintenanceResources.DeepCopy()
		pod.Containers = append(pod.Containers, sidecar)
	}
	pod.TerminationGracePeriodSeconds = ptr.To(grace)
	if d.PriorityClassName != nil {
		pod.PriorityClassName = *d.PriorityClassName
	}
	pod.TopologySpreadConstraints = topologySpreadConstraints(g)

	annotations := map[string]string{}
	if f.AuthtokenHash != "" {
		annotations[AnnotationAuthtokenHash] = f.AuthtokenHash
	}
	if f.DBConnectionHash != "" {
		annotations[AnnotationDBConnectionHash] = f.DBConnectionHash
	}
	if len(annotations) == 0 {
		annotations = nil
	}

	var replicas *int32
	if g.Spec.Autoscaling == nil {
		// Under autoscaling the HPA owns the count; a value here would
		// fight it on every apply.
		replicas = ptr.To(ptr.Deref(d.Replicas, v1alpha1.DefaultReplicas))
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: apiObjectMeta(g),
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: APIPodLabels(g.Name)},
			Strategy: strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: APIPodLabels(g.Name), Annotations: annotations},
				Spec:       pod,
			},
		},
	}, nil
}

// apiObjectMeta names a glance-api child after the Glance, with the API labels.
func apiObjectMeta(g *v1alpha1.Glance) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace, Labels: APIPodLabels(g.Name)}
}

// APICommand is the argv of the glance-api container in the launch mode of
// spec.openStackRelease.
func APICommand(g *v1alpha1.Glance) ([]string, error) {
	if release.LaunchModeOf(g.Spec.OpenStackRelease) == release.Eventlet {
		return append([]string{"glance-api"}, glanceConfigDirArgs()...), nil
	}
	var u v1alpha1.UWSGISpec
	if g.Spec.APIServer != nil && g.Spec.APIServer.UWSGI != nil {
		u = *g.Spec.APIServer.UWSGI
	}
	processes := ptr.Deref(u.Processes, v1alpha1.DefaultUWSGIProcesses)
	threads := ptr.Deref(u.Threads, v1alpha1.DefaultUWSGIThreads)
	// Each count's minimum is the CRD's rule.
	// The chunked flags are always on: glance streams image bodies with
	// chunked transfer encoding.
	cmd := []string{"uwsgi", "--http", ":" + strconv.Itoa(v1alpha1.APIPort), "--http-auto-chunked", "--http-chunked-input"}
	if ptr.Deref(u.HTTPKeepAlive, v1alpha1.DefaultUWSGIHTTPKeepAlive) {
		cmd = append(cmd, uwsgiKeepAliveFlag(u.HTTPKeepAliveTimeout),
			// A chunked request body puts the router's session in raw mode,
			// and it closes the connection after the response without
			// saying so: a client's next request on the kept-alive
			// connection is reset (a POST is not retried). Those responses
			// announce the close.
			"--route-if", uwsgiCloseAfterChunkedInput)
	} else {
		// Without keep-alive the router closes every connection after the
		// response, but answers HTTP/1.1 without saying so.
		cmd = append(cmd, "--add-header", "Connection: close")
	}
	cmd = append(cmd,
		"--wsgi-file", WSGIFile,
		"--master", "--lazy-apps", "--need-app",
		// Glance's background import tasks stall without threads enabled.
		"--enable-threads",
		// With --master, SIGTERM would otherwise reload instead of exit.
		"--die-on-term",
		"--processes", strconv.Itoa(int(processes)),
		"--threads", strconv.Itoa(int(threads)),
		// One argv element: glance's stock WSGI module ignores sys.argv,
		// the shim splits this string.
		"--pyargv", strings.Join(glanceConfigDirArgs(), " "),
	)
	if u.Harakiri != nil {
		cmd = append(cmd, "--harakiri", strconv.Itoa(int(*u.Harakiri)))
	}
	return cmd, nil
}

// workerSelfReferenceEnv sets worker_self_reference_url to the pod's own
// address. Glance records it on an image staged through glance-direct
// (os_glance_stage_host), and a replica that receives the import of an
// image staged on another proxies the call there, to the one pod whose
// staging emptyDir holds the data. The pods serve plain HTTP on APIPort.
func workerSelfReferenceEnv(family corev1.IPFamily) []corev1.EnvVar {
	host := "$(" + EnvPodIP + ")"
	if family == corev1.IPv6Protocol {
		host = "[" + host + "]"
	}
	return []corev1.EnvVar{
		{Name: EnvPodIP, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		{Name: EnvWorkerSelfReferenceURL, Value: "http://" + host + ":" + strconv.Itoa(v1alpha1.APIPort)},
	}
}

// uwsgiCloseAfterChunkedInput is the uWSGI routing rule that adds
// "Connection: close" to the response of a request with a chunked body.
// ${…} is uWSGI's request variable syntax; the kubelet expands only $(…).
// It needs uWSGI's internal routing (--route-if) in the image's build.
const uwsgiCloseAfterChunkedInput = "equal:${HTTP_TRANSFER_ENCODING};chunked addheader:Connection: close"

// uwsgiKeepAliveFlag turns on the HTTP router's keep-alive. uWSGI 2.0 has no
// separate keep-alive timeout option (an unknown option stops it from
// starting): --http-keepalive takes the idle timeout as its optional value,
// which must be attached with '=' (a separate argv element is read as a
// config file to load). A value of 1, like the bare flag, means "on, with
// the router's socket timeout" (--http-timeout, 60s), so the shortest idle
// timeout uWSGI can express is 2 seconds; 1 is rendered as 2.
func uwsgiKeepAliveFlag(timeout *int32) string {
	if timeout == nil {
		return "--http-keepalive"
	}
	return "--http-keepalive=" + strconv.Itoa(int(max(*timeout, 2)))
}

// apiProbes probe /healthcheck on the api port for startup and readiness.
// Startup allows five minutes (a first start may wait for the database).
// Liveness only checks that the port accepts connections: /healthcheck
// reports 503 on purpose while a pod is drained, which must take it out of
// the Service, not restart it; and it tolerates two minutes of failures,
// because a pod whose workers are all busy streaming images answers late.
func apiProbes() (startup, readiness, liveness *corev1.Probe) {
	probe := func(period, timeout, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path:   HealthcheckPath,
				Port:   intstr.FromString(PortNameAPI),
				Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds:    period,
			TimeoutSeconds:   timeout,
			FailureThreshold: failures,
			SuccessThreshold: 1,
		}
	}
	liveness = probe(20, 10, 6)
	liveness.HTTPGet = nil
	liveness.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromString(PortNameAPI)}
	return probe(5, 5, 60), probe(10, 5, 3), liveness
}

// deploymentStrategy is deployment.strategy with the documented defaults for
// whatever is unset: RollingUpdate, maxUnavailable 0, maxSurge 1. The type
// is one of the two by the CRD's rule.
func deploymentStrategy(g *v1alpha1.Glance) appsv1.DeploymentStrategy {
	var s appsv1.DeploymentStrategy
	if d := g.Spec.Deployment; d != nil && d.Strategy != nil {
		s = *d.Strategy.DeepCopy()
	}
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		// The API refuses rollingUpdate next to Recreate.
		s.RollingUpdate = nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(v1alpha1.DefaultMaxUnavailable))
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(v1alpha1.DefaultMaxSurge))
		}
	}
	return s
}

// topologySpreadConstraints: absent spreads over zones and hosts, an empty
// list means none, a given list is used as given.
func topologySpreadConstraints(g *v1alpha1.Glance) []corev1.TopologySpreadConstraint {
	if d := g.Spec.Deployment; d != nil && d.TopologySpreadConstraints != nil {
		given := *d.TopologySpreadConstraints
		if len(given) == 0 {
			return nil
		}
		out := make([]corev1.TopologySpreadConstraint, len(given))
		for i := range given {
			given[i].DeepCopyInto(&out[i])
		}
		return out
	}
	spread := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: APIPodLabels(g.Name)},
		}
	}
	return []corev1.TopologySpreadConstraint{spread(TopologyKeyZone), spread(TopologyKeyHostname)}
}

// stagingSizeLimit is the sizeLimit of the staging and tasks-work emptyDirs:
// nil when unbounded. A positive sizeLimit, not next to unbounded, is the
// CRD's rule.
func stagingSizeLimit(g *v1alpha1.Glance) *resource.Quantity {
	s := g.Spec.Staging
	switch {
	case s == nil || (s.SizeLimit == nil && !s.Unbounded):
		return ptr.To(resource.MustParse(v1alpha1.DefaultStagingSizeLimit))
	case s.Unbounded:
		return nil
	default:
		return ptr.To(s.SizeLimit.DeepCopy())
	}
}

// Service is the ClusterIP Service {name} in front of the API pods.
func Service(g *v1alpha1.Glance) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: apiObjectMeta(g),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: APIPodLabels(g.Name),
			Ports: []corev1.ServicePort{{
				Name:       PortNameAPI,
				Protocol:   corev1.ProtocolTCP,
				Port:       v1alpha1.APIPort,
				TargetPort: intstr.FromString(PortNameAPI),
			}},
		},
	}
}

// PodDisruptionBudget is the PDB {name}: minAvailable 1 when more than one
// replica is expected, else maxUnavailable 1 (a lone replica with
// minAvailable 1 would block every node drain).
func PodDisruptionBudget(g *v1alpha1.Glance) *policyv1.PodDisruptionBudget {
	spec := policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: APIPodLabels(g.Name)},
		// A pod that is not ready serves nothing; keeping it would only
		// block drains.
		UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
	}
	if effectiveMinReplicas(g) > 1 {
		spec.MinAvailable = ptr.To(intstr.FromInt32(1))
	} else {
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: apiObjectMeta(g),
		Spec:       spec,
	}
}

// effectiveMinReplicas is the replica count the Deployment is guaranteed to
// have: deployment.replicas, or under autoscaling its minReplicas (which
// defaults to deployment.replicas).
func effectiveMinReplicas(g *v1alpha1.Glance) int32 {
	n := v1alpha1.DefaultReplicas
	if d := g.Spec.Deployment; d != nil && d.Replicas != nil {
		n = *d.Replicas
	}
	if a := g.Spec.Autoscaling; a != nil && a.MinReplicas != nil {
		n = *a.MinReplicas
	}
	return n
}

// DefaultClusterDomain is the cluster DNS domain the Service names end in,
// unless the manager is told another (--cluster-domain).
const DefaultClusterDomain = "cluster.local"

// Endpoint is status.endpoint: the gateway URL with spec.gateway, else the
// cluster-local Service URL in clusterDomain. Both end in a slash.
func Endpoint(g *v1alpha1.Glance, clusterDomain string) string {
	if gw := g.Spec.Gateway; gw != nil {
		path := cmp.Or(gw.Path, v1alpha1.DefaultGatewayPath)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		if !strings.HasSuffix(path, "/") {
			path += "/"
		}
		return "https://" + gw.Hostname + path
	}
	return fmt.Sprintf("http://%s.%s.svc.%s:%d/", g.Name, g.Namespace, clusterDomain, v1alpha1.APIPort)
}
