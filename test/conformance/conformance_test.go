//go:build linux

package conformance

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/debianroot"
	"github.com/c5c3/glance-operator/test/glanceclient"
	"github.com/c5c3/glance-operator/test/keystone"
	"github.com/c5c3/glance-operator/test/s3store"
)

func TestMain(m *testing.M) {
	maybeRunSandbox()
	os.Exit(m.Run())
}

// Names of the objects and services the specs refer to.
const (
	namespace          = "openstack"
	glanceName         = "glance"
	dbSecretName       = "glance-db"
	dbCASecret         = "db-ca"
	dbClientSecret     = "db-client"
	serviceUserSecret  = "glance-service-user"
	keystoneHost       = "keystone.openstack.svc"
	keystonePort       = 5000
	mariadbClusterName = "mariadb"
	s3Port             = 9000
	// Characters a DSN must percent-encode, and '$', which oslo.config would
	// substitute if it reached OS_DATABASE__CONNECTION unencoded.
	dbPassword = "s3cr3t/p@ss:w0rd?#%$x+y"
	// The service user's password, before and after the rotation.
	servicePassword        = "service-user-password"
	rotatedServicePassword = "rotated/service-password$1"
	demoUser               = "demo"
	demoPassword           = "demo-password"
	demoProject            = "demo"
	// apiAddr is glance-api's address inside its pod (bind_port, --http).
	apiAddr = "127.0.0.1:9292"
)

// backendDef is one GlanceBackend of the suite and the S3 server behind it.
type backendDef struct {
	render.Backend
	server *s3store.Server
}

// suite is what both launch modes share: the root, MariaDB, Keystone, the
// S3 servers and the harness.
type suite struct {
	pki      *testPKI
	h        *harness
	db       *mariaDB
	keystone *keystone.Server
	backends []backendDef
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	if err := hostPrerequisites(); err != nil {
		t.Fatal(err)
	}
	root, err := debianroot.Glance.Dir()
	if err != nil {
		t.Fatal(err)
	}
	// GLANCE_CONFORMANCE_WORKDIR keeps the pods' files (volumes, logs) for
	// inspection; by default they go with the test.
	dir := os.Getenv("GLANCE_CONFORMANCE_WORKDIR")
	if dir == "" {
		dir = t.TempDir()
	} else {
		dir = filepath.Join(dir, time.Now().Format("20060102-150405"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("pods' files in %s", dir)
	}
	s := &suite{}
	if s.pki, err = newTestPKI(fmt.Sprintf("%s.%s.svc", mariadbClusterName, namespace), "glance"); err != nil {
		t.Fatal(err)
	}
	s.db = startMariaDB(t, filepath.Join(dir, "mariadb"), s.pki)
	s.keystone = keystone.New(fmt.Sprintf("http://%s:%d/v3", keystoneHost, keystonePort))
	s.keystone.SetUser(v1alpha1.DefaultServiceUsername, servicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin")
	s.keystone.SetUser(demoUser, demoPassword, demoProject, "member", "reader")

	east, west := s3store.New(), s3store.New()
	// s3-east's bucket exists; s3-west creates its own on the first put.
	if err := east.CreateBucket("glance-east"); err != nil {
		t.Fatal(err)
	}
	s.backends = []backendDef{
		{server: east, Backend: render.Backend{
			Name: "s3-east", AccessKeyID: "east-access-key", SecretAccessKey: "east/secret+key",
			Spec: v1alpha1.GlanceBackendSpec{
				GlanceRef: v1alpha1.LocalObjectReference{Name: glanceName}, Type: v1alpha1.BackendTypeS3, IsDefault: true,
				S3: &v1alpha1.S3BackendSpec{Host: fmt.Sprintf("http://s3-east.%s.svc:%d", namespace, s3Port), Bucket: "glance-east",
					CredentialsSecretRef: v1alpha1.LocalObjectReference{Name: "s3-east-credentials"}},
			},
		}},
		{server: west, Backend: render.Backend{
			Name: "s3-west", AccessKeyID: "west-access-key", SecretAccessKey: "west-secret-key",
			Spec: v1alpha1.GlanceBackendSpec{
				GlanceRef: v1alpha1.LocalObjectReference{Name: glanceName}, Type: v1alpha1.BackendTypeS3,
				S3: &v1alpha1.S3BackendSpec{Host: fmt.Sprintf("http://s3-west.%s.svc:%d", namespace, s3Port), Bucket: "glance-west",
					CredentialsSecretRef: v1alpha1.LocalObjectReference{Name: "s3-west-credentials"},
					Region:               "eu-west-1", CreateBucketOnPut: true,
					LargeObjectSize: ptr.To[int32](5), LargeObjectChunkSize: ptr.To[int32](5)},
			},
		}},
	}

	services := []service{
		{host: fmt.Sprintf("%s.%s.svc", mariadbClusterName, namespace), port: int(v1alpha1.DefaultDatabasePort), dial: s.db.dial},
		{host: keystoneHost, port: keystonePort, handler: s.keystone},
	}
	for _, b := range s.backends {
		services = append(services, service{host: fmt.Sprintf("%s.%s.svc", b.Name, namespace), port: s3Port, handler: b.server})
	}

	s.h = &harness{root: root, dir: filepath.Join(dir, "pods"), objects: newObjects(), services: services, image: map[string]imageFile{}}
	overlay, err := debianroot.GlanceOverlay()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range overlay {
		s.h.image["/"+name] = imageFile{content: string(data), mode: 0o755}
	}
	// oslo.config reads Debian's default /etc/glance/*.conf whenever they
	// exist (glance-api, glance-manage and the cache tools search them);
	// hide them, and Debian's paste file, so only the rendered files load.
	entries, err := os.ReadDir(filepath.Join(root, "etc/glance"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() && debianroot.GlanceDefaultConfig("etc/glance/"+e.Name()) {
			s.h.image["/etc/glance/"+e.Name()] = imageFile{whiteout: true}
		}
	}
	return s
}

// launchMode is one case: a release on each side of the uWSGI boundary.
type launchMode struct {
	name     string
	release  string
	database string
	dbUser   string
	// dbTLS connects with database.tls verify-full and a client
	// certificate; the database user requires both.
	dbTLS bool
}

var launchModes = []launchMode{
	{name: "eventlet", release: "2025.2", database: "glance_eventlet", dbUser: "glance"},
	{name: "uwsgi", release: "2026.1", database: "glance_uwsgi", dbUser: "glance_tls", dbTLS: true},
}

// Sizes of the suite's images and cache: one image fits under
// image_cache_max_size, two do not.
const (
	imageCacheSize = "12Mi"
	imageEastSize  = 8<<20 + 4099
	imageWestSize  = 9 << 20
)

func glanceSpec(m launchMode) *v1alpha1.Glance {
	g := &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Name: glanceName, Namespace: namespace},
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: m.release,
			Image:            v1alpha1.ImageSpec{Repository: "registry.example.com/openstack/glance", Tag: m.release},
			Database: v1alpha1.DatabaseSpec{
				ClusterRef: &v1alpha1.LocalObjectReference{Name: mariadbClusterName},
				Database:   m.database,
				SecretRef:  v1alpha1.SecretKeySelector{Name: dbSecretName},
			},
			KeystoneEndpoint: fmt.Sprintf("http://%s:%d/v3", keystoneHost, keystonePort),
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: serviceUserSecret}},
			Deployment: &v1alpha1.GlanceDeploymentSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](20),
				PreStopSleepSeconds:           ptr.To[int64](1),
			},
			ImageCache: &v1alpha1.ImageCacheSpec{Size: resource.MustParse(imageCacheSize)},
			DBPurge:    &v1alpha1.DBPurgeSpec{AgeInDays: ptr.To[int32](1)},
		},
	}
	if m.dbTLS {
		g.Spec.Database.TLS = &v1alpha1.DatabaseTLSSpec{
			Mode:                v1alpha1.DatabaseTLSVerifyFull,
			CABundleSecretRef:   &v1alpha1.SecretKeySelector{Name: dbCASecret},
			ClientCertSecretRef: &v1alpha1.LocalObjectReference{Name: dbClientSecret},
		}
	}
	// Each optional file and section the renderer writes is loaded by real
	// Glance in at least one mode.
	if m.name == "eventlet" {
		g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](2)}
		// Text logs, with one logger raised to DEBUG: logging.conf.
		g.Spec.Logging = &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{cacheLogger: "DEBUG"}}
		// policy.yaml.
		g.Spec.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{Rules: map[string]v1alpha1.PolicyRule{deniedRule: "!"}}
		// Where clients are sent to authenticate differs from where
		// glance validates tokens.
		g.Spec.KeystonePublicEndpoint = "https://keystone.example.com/v3"
		// A middleware of the user's, before authentication.
		g.Spec.Middleware = []v1alpha1.MiddlewareSpec{{Name: "request-id", FilterFactory: "oslo_middleware:RequestId.factory", Position: v1alpha1.MiddlewareBeforeAuth}}
	} else {
		g.Spec.APIServer = &v1alpha1.APIServerSpec{UWSGI: &v1alpha1.UWSGISpec{
			Processes: ptr.To[int32](2), Threads: ptr.To[int32](2),
			HTTPKeepAlive: ptr.To(true), HTTPKeepAliveTimeout: ptr.To[int32](30), Harakiri: ptr.To[int32](15),
		}}
		// JSON logs: logging.conf with oslo.log's JSON formatter.
		g.Spec.Logging = &v1alpha1.LoggingSpec{Format: v1alpha1.LogFormatJSON}
		// An import plugin with its config section.
		g.Spec.Plugins = []v1alpha1.PluginSpec{{Name: "inject_image_metadata", ConfigSection: "inject_metadata_properties",
			Config: map[string]string{"inject": injectedProperty + ":yes"}}}
		// extraConfig overrides what the operator renders.
		g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"show_image_direct_url": "true"}}
		// The catalog's region.
		g.Spec.Region = "RegionOne"
	}
	return g
}

const (
	// deniedRule is a policy the demo user passes by default, denied by
	// policyOverrides in one mode.
	deniedRule = "communitize_image"
	// cacheLogger logs "Cache hit for image" at DEBUG.
	cacheLogger = "glance.api.middleware.cache"
	// injectedProperty is what the inject_image_metadata plugin adds on
	// import.
	injectedProperty = "conformance_injected"
)

// rendered are the objects the operator produces for a Glance.
type rendered struct {
	files       map[string]string
	configMap   string
	backendsSec string
	deployment  *appsv1.Deployment
	jobs        map[render.DatabaseJobKind]*batchv1.Job
	purge       *batchv1.CronJob
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// renderObjects renders what the operator's steps produce, with the render
// package the controller uses, and applies the ConfigMap and Secrets to the
// harness's namespace.
func (s *suite) renderObjects(t *testing.T, g *v1alpha1.Glance, m launchMode) rendered {
	t.Helper()
	o := s.h.objects
	o.putSecret(dbCASecret, map[string]string{v1alpha1.DefaultCABundleKey: s.pki.caPEM})
	o.putSecret(dbClientSecret, map[string]string{corev1.TLSCertKey: s.pki.clientCert, corev1.TLSPrivateKeyKey: s.pki.clientKey})
	dbUser := m.dbUser
	var backends []render.Backend
	def := ""
	for _, b := range s.backends {
		if err := render.CheckBackend(b.Backend); err != nil {
			t.Fatalf("backend %s: %v", b.Name, err)
		}
		backends = append(backends, b.Backend)
		o.putSecret(b.Spec.S3.CredentialsSecretRef.Name, map[string]string{"access-key-id": b.AccessKeyID, "secret-access-key": b.SecretAccessKey})
		if b.Spec.IsDefault {
			def = b.Name
		}
	}
	files, err := render.ConfigFiles(g, render.ConfigFacts{DefaultBackend: def, StoreCount: len(backends)})
	if err != nil {
		t.Fatalf("ConfigFiles: %v", err)
	}
	conf, err := render.BackendsConf(backends)
	if err != nil {
		t.Fatalf("BackendsConf: %v", err)
	}
	backendsData := map[string]string{render.BackendsConfKey: conf}
	r := rendered{
		files:       files,
		configMap:   render.ConfigMapName(g.Name, files),
		backendsSec: render.BackendsSecretName(g.Name, backendsData),
		jobs:        map[render.DatabaseJobKind]*batchv1.Job{},
	}
	o.putConfigMap(r.configMap, files)
	o.putSecret(r.backendsSec, backendsData)

	o.putSecret(dbSecretName, map[string]string{v1alpha1.DefaultDatabaseUsernameKey: dbUser, v1alpha1.DefaultDatabasePasswordKey: dbPassword})
	dsn, err := render.DSN(g, dbUser, dbPassword)
	if err != nil {
		t.Fatalf("DSN: %v", err)
	}
	o.putSecret(render.DBConnectionSecretName(g.Name), map[string]string{render.DBConnectionKey: dsn})
	password, ok := o.get("Secret", serviceUserSecret)
	if !ok {
		t.Fatalf("secret %s is missing", serviceUserSecret)
	}
	facts := render.WorkloadFacts{
		ConfigMapName:      r.configMap,
		BackendsSecretName: r.backendsSec,
		AuthtokenHash:      sha256Hex(password[v1alpha1.DefaultServiceUserPasswordKey]),
		DBConnectionHash:   sha256Hex(dsn),
	}
	if r.deployment, err = render.Deployment(g, facts); err != nil {
		t.Fatalf("Deployment: %v", err)
	}
	for _, kind := range []render.DatabaseJobKind{render.DBSync, render.DBExpand, render.DBMigrate, render.DBContract} {
		if r.jobs[kind], err = render.DatabaseJob(g, facts, kind, ""); err != nil {
			t.Fatalf("DatabaseJob %s: %v", kind, err)
		}
	}
	if r.purge, err = render.DBPurgeCronJob(g, facts); err != nil {
		t.Fatalf("DBPurgeCronJob: %v", err)
	}
	return r
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the pod has no container %s", name)
	return corev1.Container{}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	s := newSuite(t)
	for _, m := range launchModes {
		t.Run(m.name, func(t *testing.T) {
			start := time.Now()
			s.testLaunchMode(t, m)
			t.Logf("%s: %s", m.name, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// apiPod is a running API pod: glance-api and, with imageCache, the
// cache-maintenance sidecar.
type apiPod struct {
	*pod
	api, sidecar *process
	client       *glanceclient.Client
}

// Test-only overrides of the sidecar's timing (cachemaintenance.go): poll
// every second; run on the cache's size only, not on the interval.
var sidecarEnv = []string{"CACHE_POLL_SECONDS=1", "CACHE_MAINTENANCE_INTERVAL_SECONDS=86400"}

// startAPI runs the Deployment's pod and waits until its startup probe
// passes. The pod lives as long as life.
func (s *suite) startAPI(t, life *testing.T, name string, d *appsv1.Deployment) *apiPod {
	t.Helper()
	spec := d.Spec.Template.Spec
	p := &apiPod{pod: s.h.newPod(life, name, spec)}
	api := container(t, spec, render.ContainerAPI)
	var err error
	if p.api, err = p.start(api, runOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range spec.Containers {
		if c.Name == render.ContainerCacheMaintenance {
			if p.sidecar, err = p.start(c, runOptions{env: sidecarEnv}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.client = &glanceclient.Client{HTTP: p.httpClient(), Base: "http://" + apiAddr}
	probe := api.StartupProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatal("glance-api has no HTTP startup probe")
	}
	port := probe.HTTPGet.Port.IntValue()
	for _, cp := range api.Ports {
		if cp.Name == probe.HTTPGet.Port.StrVal {
			port = int(cp.ContainerPort)
		}
	}
	probeURL := fmt.Sprintf("http://127.0.0.1:%d%s", port, probe.HTTPGet.Path)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := p.client.HTTP.Get(probeURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if !p.api.running() {
			t.Fatalf("glance-api exited before its startup probe passed: %v\n%s", p.api.err, p.api.tail(60))
		}
		if time.Now().After(deadline) {
			t.Fatalf("glance-api's startup probe %s did not pass within 3 minutes; its output:\n%s", probeURL, p.api.tail(60))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop terminates the pod as the kubelet does: glance-api's preStop sleep,
// then SIGTERM to every container, then SIGKILL once the grace period is
// over. It reports a container still running after the grace period.
func (p *apiPod) stop(t *testing.T) {
	t.Helper()
	grace := time.Duration(ptr.Deref(p.spec.TerminationGracePeriodSeconds, 30)) * time.Second
	begin := time.Now()
	api := container(t, p.spec, render.ContainerAPI)
	if l := api.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		time.Sleep(time.Duration(l.PreStop.Sleep.Seconds) * time.Second)
	}
	procs := []*process{p.api}
	if p.sidecar != nil {
		procs = append(procs, p.sidecar)
	}
	term := time.Now()
	var signalled []*process
	for _, pr := range procs {
		if !pr.running() {
			t.Errorf("%s had exited before SIGTERM (%v); its output:\n%s", pr.name, pr.err, pr.tail(30))
			continue
		}
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
		signalled = append(signalled, pr)
	}
	for _, pr := range signalled {
		exited, _ := pr.wait(time.Until(begin.Add(grace)))
		if !exited {
			pr.kill()
			t.Errorf("%s did not exit within the grace period of %s after SIGTERM; its output:\n%s", pr.name, grace, pr.tail(30))
			continue
		}
		t.Logf("%s exited %s after SIGTERM", pr.name, pr.exitAt.Sub(term).Round(10*time.Millisecond))
	}
}
