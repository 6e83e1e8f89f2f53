package realnode

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/keystoneadmin"
	"github.com/c5c3/glance-operator/test/stack"
)

// A scene's Keystone: keystone-manage bootstrap's administrator and region,
// and its database on the scene's MariaDB.
const (
	KeystoneName          = "keystone"
	KeystoneAdminUser     = "admin"
	KeystoneAdminProject  = "admin"
	KeystoneAdminPassword = "keystone-admin-password"
	KeystoneRegion        = "RegionOne"
	keystoneDBPassword    = "keystone-db-password"
	// keystoneSecret holds keystone.conf and the administrator's password.
	keystoneSecret = "keystone"
	// keystoneDBSecret holds the database user's password, which the
	// mariadb-operator User reads.
	keystoneDBSecret = "keystone-db"
)

// keystoneConf is the keystone.conf of the Keystone in namespace ns: its
// database on the scene's MariaDB, its fernet keys (of tokens and of
// receipts, which fernet_setup makes both) and credential keys in the
// pod's emptyDir, the audit of every password authentication in its log.
// bcrypt's fewest rounds: at its default of 12, three scenes' users and
// clients hashing on two shared cores held a scene's set-up for half a
// minute; what Keystone checks is the same.
func keystoneConf(ns string) string {
	return keystoneadmin.AuditConfig + fmt.Sprintf(`
[database]
connection = mysql+pymysql://%[1]s:%[2]s@mariadb.%[3]s.svc:%[4]d/%[1]s?charset=utf8

[fernet_tokens]
key_repository = %[5]s/fernet-keys

[fernet_receipts]
key_repository = %[5]s/fernet-keys

[credential]
key_repository = %[5]s/credential-keys

[identity]
password_hash_rounds = 4
`, KeystoneName, keystoneDBPassword, ns, MariaDBPort, keystoneStateDir)
}

// keystoneStateDir is where the Keystone pod keeps its keys: an emptyDir.
const keystoneStateDir = "/var/lib/keystone"

// keystoneDatabase are Keystone's database, user and grant for
// mariadb-operator on the scene's MariaDB, as the operator makes Glance's,
// and the Secret of the user's password.
func keystoneDatabase(ns string) []client.Object {
	ref := map[string]any{"name": "mariadb"}
	object := func(gvk schema.GroupVersionKind, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(KeystoneName)
		return u
	}
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keystoneDBSecret, Namespace: ns}, StringData: map[string]string{"password": keystoneDBPassword}},
		object(render.DatabaseGVK, map[string]any{"mariaDbRef": ref, "name": KeystoneName, "characterSet": "utf8", "collate": "utf8_general_ci"}),
		object(render.UserGVK, map[string]any{"mariaDbRef": ref, "name": KeystoneName, "host": "%",
			"passwordSecretKeyRef": map[string]any{"name": keystoneDBSecret, "key": "password"}}),
		object(render.GrantGVK, map[string]any{"mariaDbRef": ref, "privileges": []any{"ALL PRIVILEGES"}, "database": KeystoneName, "table": "*",
			"username": KeystoneName, "host": "%"}),
	}
}

// keystonePod runs Keystone from image: an init container makes the
// database's schema (db_sync), the fernet and credential keys, and
// bootstraps the administrator, the roles and the identity service at
// publicURL on every interface; then uWSGI serves Keystone's WSGI module
// on KeystonePort. Everything runs as the image's keystone user.
func keystonePod(image, publicURL string) *corev1.Pod {
	setup := fmt.Sprintf(`keystone-manage db_sync
keystone-manage fernet_setup --keystone-user keystone --keystone-group keystone
keystone-manage credential_setup --keystone-user keystone --keystone-group keystone
keystone-manage bootstrap --bootstrap-username %s --bootstrap-project-name %s --bootstrap-region-id %s \
  --bootstrap-admin-url %[4]s --bootstrap-internal-url %[4]s --bootstrap-public-url %[4]s`,
		KeystoneAdminUser, KeystoneAdminProject, KeystoneRegion, publicURL)
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/keystone/keystone.conf", SubPath: "keystone.conf", ReadOnly: true},
		{Name: "state", MountPath: keystoneStateDir},
		{Name: "tmp", MountPath: "/tmp"},
	}
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: KeystoneName},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			InitContainers: []corev1.Container{{
				Name:    "setup",
				Image:   image,
				Command: []string{"sh", "-ec", setup},
				// keystone-manage bootstrap reads the administrator's
				// password from here.
				Env: []corev1.EnvVar{{Name: "OS_BOOTSTRAP_PASSWORD", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: keystoneSecret}, Key: "admin-password"},
				}}},
				SecurityContext: Restricted(),
				VolumeMounts:    mounts,
			}},
			Containers: []corev1.Container{{
				Name:  KeystoneName,
				Image: image,
				// Without keep-alive uWSGI's HTTP socket closes every
				// connection after the response but answers HTTP/1.1
				// without saying so: a client's next request on the
				// connection would be reset.
				Command: []string{"uwsgi", "--plugin", "python3", "--http-socket", ":" + strconv.Itoa(KeystonePort), "--add-header", "Connection: close",
					"--module", "keystone.wsgi.api:application", "--master", "--need-app", "--enable-threads", "--die-on-term",
					"--processes", "2", "--threads", "2"},
				Ports:           []corev1.ContainerPort{{ContainerPort: KeystonePort}},
				SecurityContext: Restricted(),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v3", Port: intstr.FromInt32(KeystonePort)}},
					PeriodSeconds: 1,
				},
				VolumeMounts: mounts,
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: keystoneSecret, Items: []corev1.KeyToPath{{Key: "keystone.conf", Path: "keystone.conf"}},
				}}},
				{Name: "state", VolumeSource: emptyDir},
				{Name: "tmp", VolumeSource: emptyDir},
			},
		},
	}
}

// startKeystone runs the Keystone of the scene in namespace ns from image,
// once its database is Ready, and returns its administrator's client and
// its v3 endpoint, both by the pod's IP.
func (e *Env) startKeystone(ctx context.Context, cl client.Client, ns, image, publicURL string) (*keystoneadmin.Client, string, error) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: keystoneSecret, Namespace: ns},
		StringData: map[string]string{"keystone.conf": keystoneConf(ns), "admin-password": KeystoneAdminPassword},
	}
	if err := cl.Create(ctx, secret); err != nil {
		return nil, "", err
	}
	db := keystoneDatabase(ns)
	for _, obj := range db {
		if err := cl.Create(ctx, obj); err != nil {
			return nil, "", err
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, obj := range db {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if err := cl.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil || !stack.IsReady(u) {
					return false, err
				}
			}
		}
		return true, nil
	}); err != nil {
		return nil, "", fmt.Errorf("Keystone's database in %s not Ready: %w", ns, err)
	}
	ready, _, err := e.ServePod(ctx, ns, keystonePod(image, publicURL), corev1.ServicePort{Port: KeystonePort, TargetPort: intstr.FromInt32(KeystonePort)})
	if err != nil {
		return nil, "", fmt.Errorf("%w%s", err, e.setupLog(ctx, ns))
	}
	url := fmt.Sprintf("http://%s:%d/v3", ready.Status.PodIP, KeystonePort)
	admin, err := keystoneadmin.Login(ctx, adminClient, url, KeystoneAdminUser, KeystoneAdminPassword, KeystoneAdminProject)
	return admin, url, err
}

// setupLog is the end of the Keystone pod's setup log, for a failure
// message.
func (e *Env) setupLog(ctx context.Context, ns string) string {
	b, err := e.CS.CoreV1().Pods(ns).GetLogs(KeystoneName, &corev1.PodLogOptions{Container: "setup", TailLines: ptr.To[int64](20)}).DoRaw(ctx)
	if err != nil {
		return "\n(Keystone's setup log: " + err.Error() + ")"
	}
	return "\nKeystone's setup log:\n" + string(b)
}
