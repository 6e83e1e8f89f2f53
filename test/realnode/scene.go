package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/debianroot"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/keystone"
)

// What a scene holds, by name.
const (
	KeystonePort     = 5000
	StandInAdminPort = 9001
	Bucket           = "glance-images"
	GlanceName       = "glance"
	BackendName      = "s3"
	DemoUser         = "demo"
	DemoProject      = "demo"
	DemoPassword     = "demo-password"
	// The passwords a scene starts with. The DB password holds what a DSN
	// must percent-encode, and '$', which oslo.config would substitute.
	DBPassword          = "s3cr3t/p@ss:w0rd?#%$x+y"
	ServicePassword     = "service-user-password"
	DBSecretName        = "glance-db"
	ServiceSecretName   = "glance-service-user"
	S3CredentialsSecret = "s3-credentials"
	// MultipartThresholdMiB is the backend's largeObjectSize and
	// largeObjectChunkSize.
	MultipartThresholdMiB = 5
)

// SceneImages are the images of a scene beside the chart's: the Keystone
// stand-in, the S3 server and MariaDB by digest, and the repository of the
// Glance images, tagged by release.
type SceneImages struct {
	StandIns, S3, MariaDB, GlanceRepository string
}

// PushSceneImages builds and pushes the scene's images, at the same time:
// the Glance images of root tagged with each of releases. The images of the
// Debian roots come from the artifact cache, written once per machine.
func (e *Env) PushSceneImages(ctx context.Context, root debianroot.Root, releases []string) (SceneImages, error) {
	reg, dir := e.Cluster.Registry, e.ImageDir()
	var imgs SceneImages
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() {
		imgs.StandIns, errs[0] = reg.BuildAndPush(ctx, dir, "standins", "./test/realnode/standins", "test/standins", "v1")
	})
	wg.Go(func() {
		var bin string
		if bin, errs[3] = controlplane.BinDir("seaweedfs"); errs[3] == nil {
			imgs.S3, errs[3] = reg.PushBinary(ctx, dir, "seaweedfs", filepath.Join(bin, "seaweedfs"), "test/seaweedfs", "v1")
		}
	})
	wg.Go(func() {
		var archive string
		if archive, _, errs[1] = debianroot.MariaDBImageArchive("test/mariadb:trixie"); errs[1] == nil {
			imgs.MariaDB, errs[1] = reg.Push(ctx, archive, "test/mariadb", "trixie")
		}
	})
	wg.Go(func() { imgs.GlanceRepository, errs[2] = e.PushGlanceImage(ctx, root, releases) })
	wg.Wait()
	return imgs, errors.Join(errs...)
}

// PushGlanceImage builds the Glance images of root, one per launch mode of
// releases and at the same time, and pushes each tagged with its releases;
// it returns the repository.
func (e *Env) PushGlanceImage(ctx context.Context, root debianroot.Root, releases []string) (string, error) {
	byMode := map[release.LaunchMode][]string{}
	for _, r := range releases {
		mode := release.LaunchModeOf(r)
		byMode[mode] = append(byMode[mode], r)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for mode, tags := range byMode {
		wg.Go(func() {
			archive, _, err := debianroot.GlanceImageArchive(root, mode, "openstack/glance:"+tags[0])
			for _, tag := range tags {
				if err == nil {
					_, err = e.Cluster.Registry.Push(ctx, archive, "openstack/glance", tag)
				}
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return e.Cluster.Registry.Host + "/openstack/glance", errors.Join(errs...)
}

// Scene is a namespace with what a Glance needs, all running as pods: a
// Keystone stand-in, an S3 server, a MariaDB (through the MariaDB stand-in
// operator), the Secrets, and an S3 GlanceBackend.
type Scene struct {
	Namespace string
	// KeystoneAdmin is the Keystone stand-in's admin API, by pod IP.
	KeystoneAdmin string
	// S3 is the scene's S3 server.
	S3 *S3Server
}

// KeystoneURL is the Keystone endpoint as pods see it.
func (s *Scene) KeystoneURL() string {
	return fmt.Sprintf("http://keystone.%s.svc:%d/v3", s.Namespace, KeystonePort)
}

// APIURL is Glance's endpoint by the Service's DNS name.
func (s *Scene) APIURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", GlanceName, s.Namespace, v1alpha1.APIPort)
}

// NewGlance is the scene's Glance of release: two replicas of the
// registry's image, the scene's Keystone.
func (s *Scene) NewGlance(imgs SceneImages, release string) *v1alpha1.Glance {
	g := fixtures.NewGlance(s.Namespace, GlanceName, release)
	g.Spec.Image = v1alpha1.ImageSpec{Repository: imgs.GlanceRepository, Tag: release}
	g.Spec.KeystoneEndpoint = s.KeystoneURL()
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](2)}
	// The rotation story's source alternates two Keystone users: the
	// Secret names the user, and the spec says so.
	g.Spec.ServiceUser.UsernameKey = "username"
	return g
}

// SetScene sets the scene in namespace ns, which exists: the stand-ins
// with the service and demo users, the Secrets, the MariaDB and the S3
// backend of the Glance named GlanceName.
func (e *Env) SetScene(ctx context.Context, cl client.Client, ns string, imgs SceneImages) (*Scene, error) {
	s := &Scene{Namespace: ns}
	var err error
	if s.KeystoneAdmin, err = e.standIn(ctx, ns, imgs.StandIns, "keystone", KeystonePort, "-url", s.KeystoneURL()); err != nil {
		return nil, err
	}
	if s.S3, err = e.startS3Server(ctx, ns, imgs.S3, Bucket); err != nil {
		return nil, err
	}
	if err := s.SetKeystoneUser(ctx, v1alpha1.DefaultServiceUsername, ServicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin"); err != nil {
		return nil, err
	}
	if err := s.SetKeystoneUser(ctx, DemoUser, DemoPassword, DemoProject, "member", "reader"); err != nil {
		return nil, err
	}
	mariadb := &unstructured.Unstructured{}
	mariadb.SetGroupVersionKind(render.MariaDBGVK)
	mariadb.SetNamespace(ns)
	mariadb.SetName("mariadb")
	if err := unstructured.SetNestedField(mariadb.Object, int64(1), "spec", "replicas"); err != nil {
		return nil, err
	}
	b := fixtures.NewBackend(ns, BackendName, GlanceName, true, S3CredentialsSecret)
	b.Spec.S3.Host = s.S3URL("http", S3Port)
	b.Spec.S3.Bucket = Bucket
	// Uploads of a known size above 5 MiB go multipart, in parts of 5 MiB
	// (the least glance_store takes).
	b.Spec.S3.LargeObjectSize = ptr.To[int32](MultipartThresholdMiB)
	b.Spec.S3.LargeObjectChunkSize = ptr.To[int32](MultipartThresholdMiB)
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DBSecretName, Namespace: ns}, StringData: map[string]string{"username": "glance", "password": DBPassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ServiceSecretName, Namespace: ns}, StringData: map[string]string{"username": v1alpha1.DefaultServiceUsername, "password": ServicePassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: S3CredentialsSecret, Namespace: ns}, StringData: map[string]string{v1alpha1.S3AccessKeyIDKey: S3AccessKeyID, v1alpha1.S3SecretAccessKeyKey: S3SecretAccessKey}},
		mariadb, b,
	} {
		if err := cl.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// standIn runs a stand-in (Keystone) as a pod behind a Service of
// its name on port, and returns its admin API's base URL, by pod IP.
func (e *Env) standIn(ctx context.Context, ns, image, name string, port int32, args ...string) (string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:  name,
				Image: image,
				Args: append([]string{name, "-addr", fmt.Sprintf(":%d", port), "-admin", fmt.Sprintf(":%d", StandInAdminPort)},
					args...),
				Ports:           []corev1.ContainerPort{{ContainerPort: port}, {ContainerPort: StandInAdminPort}},
				SecurityContext: Restricted(),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	ready, _, err := e.ServePod(ctx, ns, pod, corev1.ServicePort{Port: port, TargetPort: intstr.FromInt32(port)})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("http://%s:%d", ready.Status.PodIP, StandInAdminPort), nil
}

// adminClient is the client of the Keystone stand-in's admin API.
var adminClient = &http.Client{Timeout: 30 * time.Second}

// SetKeystoneUser creates or changes a user in the Keystone stand-in, as
// an operator would in Keystone.
func (s *Scene) SetKeystoneUser(ctx context.Context, name, password, project string, roles ...string) error {
	body, err := json.Marshal(keystone.UserRequest{Password: password, Project: project, Roles: roles})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.KeystoneAdmin+"/users/"+url.PathEscape(name), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return adminCall(req, nil)
}

// KeystoneAttempts are the password authentications of user the Keystone
// stand-in saw since t0.
func (s *Scene) KeystoneAttempts(ctx context.Context, user string, t0 time.Time) ([]keystone.Attempt, error) {
	q := url.Values{"user": {user}, "since": {t0.UTC().Format(time.RFC3339Nano)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.KeystoneAdmin+"/attempts?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var attempts []keystone.Attempt
	return attempts, adminCall(req, &attempts)
}

// S3URL is the S3 server's endpoint as pods see it, by scheme and port.
func (s *Scene) S3URL(scheme string, port int) string {
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, S3ServiceName, s.Namespace, port)
}

// Object reads an object of the bucket from the S3 server; ok is false when
// there is none.
func (s *Scene) Object(ctx context.Context, key string) (obj S3Object, ok bool, err error) {
	return s.S3.Object(ctx, Bucket, key)
}

// ObjectReads counts the GETs of an object of the bucket that the S3
// server has logged: Glance's, and Object's.
func (s *Scene) ObjectReads(ctx context.Context, key string) (int, error) {
	return s.S3.ObjectReads(ctx, Bucket, key)
}

// CreateBucket creates a bucket in the S3 server, which Glance's
// credentials may use; one that exists is no error.
func (s *Scene) CreateBucket(ctx context.Context, name string) error {
	return s.S3.CreateBucket(ctx, name)
}

// adminStatusError is an admin API's answer other than 2xx.
type adminStatusError struct {
	code int
	msg  string
}

func (e adminStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.msg) }

// adminCall sends req to a stand-in's admin API and decodes a 2xx answer
// into out, when given.
func adminCall(req *http.Request, out any) error {
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return adminStatusError{code: resp.StatusCode, msg: string(bytes.TrimSpace(b))}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	return nil
}
