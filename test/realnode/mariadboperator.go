package realnode

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/stack"
)

// MariaDBPort is where the stand-in's MariaDB servers listen.
const MariaDBPort = 3306

// The MariaDB stand-in's administrative account, which it creates at the
// server's first start from the Secret <MariaDB>-stand-in-admin.
const (
	mariadbAdminUser      = "stand-in-admin"
	mariadbAdminSecretFmt = "%s-stand-in-admin"
)

// mariadbOperator plays mariadb-operator on the real node, far enough for
// Glance to run against a real database: a MariaDB becomes a MariaDB server
// (a Deployment of the Debian MariaDB image, data in an emptyDir, behind a
// Service of the MariaDB's name); a Database, User or Grant becomes the
// database, user or grant in that server, and reports Ready once applied. A
// User's password follows its Secret, as mariadb-operator's does.
type mariadbOperator struct {
	client client.Client
	image  string

	mu sync.Mutex
	// servers are the connections to each MariaDB, by MariaDB.
	servers map[types.NamespacedName]*sql.DB
	// passwords are the digests of the password each User last set.
	passwords map[types.NamespacedName]string
}

// StartMariaDBOperator runs the MariaDB stand-in in this process, its log
// in logDir/mariadb-operator.log, until stop is called. image is the
// MariaDB server image by digest.
func StartMariaDBOperator(ctx context.Context, cfg *rest.Config, image, logDir string) (stop func() error, err error) {
	var op *mariadbOperator
	mgr, err := stack.StartStandInManager(ctx, cfg, logDir, "mariadb-operator", func(mgr ctrl.Manager) error {
		op = &mariadbOperator{client: mgr.GetClient(), image: image, servers: map[types.NamespacedName]*sql.DB{}, passwords: map[types.NamespacedName]string{}}
		server := &unstructured.Unstructured{}
		server.SetGroupVersionKind(render.MariaDBGVK)
		if err := ctrl.NewControllerManagedBy(mgr).Named("stand-in-mariadb").For(server).
			Owns(&appsv1.Deployment{}).Complete(reconcile.Func(op.reconcileServer)); err != nil {
			return err
		}
		for _, gvk := range []schema.GroupVersionKind{render.DatabaseGVK, render.UserGVK, render.GrantGVK} {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			b := ctrl.NewControllerManagedBy(mgr).Named("stand-in-" + strings.ToLower(gvk.Kind)).For(obj)
			if gvk == render.UserGVK {
				b = b.Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(op.usersOfSecret))
			}
			if err := b.Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				return op.reconcileSQL(ctx, gvk, req)
			})); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func() error {
		err := mgr.Stop()
		op.mu.Lock()
		defer op.mu.Unlock()
		for _, db := range op.servers {
			_ = db.Close()
		}
		return err
	}, nil
}

// notYet is how soon an object waiting for its server is looked at again.
const notYet = 2 * time.Second

// reconcileServer keeps a MariaDB's admin Secret, Deployment and Service,
// and reports it Ready once the server answers.
func (op *mariadbOperator) reconcileServer(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(render.MariaDBGVK)
	if err := op.client.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m.GetDeletionTimestamp() != nil {
		op.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	labels := map[string]string{"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": m.GetName()}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf(mariadbAdminSecretFmt, m.GetName()), Namespace: m.GetNamespace()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, op.client, secret, func() error {
		if len(secret.Data["password"]) == 0 {
			secret.Data = map[string][]byte{"password": []byte(randomHex(16))}
		}
		pw := string(secret.Data["password"])
		secret.Data["init.sql"] = []byte(fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\nGRANT ALL PRIVILEGES ON *.* TO '%s'@'%%' WITH GRANT OPTION;\n",
			mariadbAdminUser, pw, mariadbAdminUser))
		return controllerutil.SetControllerReference(m, secret, op.client.Scheme())
	}); err != nil {
		return reconcile.Result{}, err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, op.client, dep, func() error {
		if dep.CreationTimestamp.IsZero() {
			dep.Spec = mariadbDeploymentSpec(op.image, secret.Name, labels)
		}
		return controllerutil.SetControllerReference(m, dep, op.client.Scheme())
	}); err != nil {
		return reconcile.Result{}, err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, op.client, svc, func() error {
		svc.Spec.Selector = labels
		svc.Spec.Ports = []corev1.ServicePort{{Name: "mysql", Port: MariaDBPort, TargetPort: intstr.FromInt32(MariaDBPort)}}
		return controllerutil.SetControllerReference(m, svc, op.client.Scheme())
	}); err != nil {
		return reconcile.Result{}, err
	}
	if dep.Status.AvailableReplicas < 1 {
		return reconcile.Result{}, nil // the Deployment's status change brings it back
	}
	if _, err := op.server(ctx, req.NamespacedName); err != nil {
		return reconcile.Result{RequeueAfter: notYet}, nil
	}
	changed, err := stack.SetReady(m, "a MariaDB server of the real node's mariadb-operator stand-in answers")
	if err != nil || !changed {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, op.client.Status().Update(ctx, m)
}

// mariadbDeploymentSpec runs one MariaDB server, its data in an emptyDir,
// its admin account made at the first start from the admin Secret.
func mariadbDeploymentSpec(image, adminSecret string, labels map[string]string) appsv1.DeploymentSpec {
	script := `set -e
if [ ! -d /var/lib/mysql/mysql ]; then
  mariadb-install-db --no-defaults --datadir=/var/lib/mysql --user=root --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve >/dev/null
fi
exec mariadbd --no-defaults --datadir=/var/lib/mysql --user=root --bind-address=0.0.0.0 --port=3306 \
  --socket=/run/mysqld/mysqld.sock --skip-name-resolve --skip-log-bin --init-file=/etc/stand-in/init.sql \
  --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --innodb-flush-log-at-trx-commit=0 \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci --max-connections=500`
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	return appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{
					Name:    "mariadb",
					Image:   image,
					Command: []string{"sh", "-c", script},
					Ports:   []corev1.ContainerPort{{Name: "mysql", ContainerPort: MariaDBPort}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(MariaDBPort)}},
						PeriodSeconds: 1,
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "data", MountPath: "/var/lib/mysql"},
						{Name: "run", MountPath: "/run/mysqld"},
						{Name: "tmp", MountPath: "/tmp"},
						{Name: "init", MountPath: "/etc/stand-in", ReadOnly: true},
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "data", VolumeSource: emptyDir},
					{Name: "run", VolumeSource: emptyDir},
					{Name: "tmp", VolumeSource: emptyDir},
					{Name: "init", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: adminSecret, Items: []corev1.KeyToPath{{Key: "init.sql", Path: "init.sql"}},
					}}},
				},
			},
		},
	}
}

// server returns a connection to a MariaDB's server through its Service,
// checked with a ping.
func (op *mariadbOperator) server(ctx context.Context, key types.NamespacedName) (*sql.DB, error) {
	op.mu.Lock()
	db := op.servers[key]
	op.mu.Unlock()
	if db == nil {
		secret := &corev1.Secret{}
		if err := op.client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: fmt.Sprintf(mariadbAdminSecretFmt, key.Name)}, secret); err != nil {
			return nil, err
		}
		svc := &corev1.Service{}
		if err := op.client.Get(ctx, key, svc); err != nil {
			return nil, err
		}
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd = mariadbAdminUser, string(secret.Data["password"])
		cfg.Net, cfg.Addr = "tcp", fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, MariaDBPort)
		cfg.InterpolateParams = true
		// A MariaDB pod can vanish with its namespace without closing its
		// connections: bound every read and write, or closing the pool at
		// stop waits minutes for TCP to give up on the dead peer.
		cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 3*time.Second, 10*time.Second, 5*time.Second
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		db = sql.OpenDB(connector)
		db.SetMaxOpenConns(2)
		op.mu.Lock()
		if existing := op.servers[key]; existing != nil {
			_ = db.Close()
			db = existing
		} else {
			op.servers[key] = db
		}
		op.mu.Unlock()
	}
	pingCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		return nil, fmt.Errorf("MariaDB %s: %w", key, err)
	}
	return db, nil
}

func (op *mariadbOperator) forget(key types.NamespacedName) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if db := op.servers[key]; db != nil {
		_ = db.Close()
		delete(op.servers, key)
	}
}

// privileges is what a Grant's privileges may say: SQL keywords only.
var privileges = regexp.MustCompile(`^[A-Z ]+$`)

// reconcileSQL applies a Database, User or Grant to its server and reports
// it Ready.
func (op *mariadbOperator) reconcileSQL(ctx context.Context, gvk schema.GroupVersionKind, req reconcile.Request) (reconcile.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := op.client.Get(ctx, req.NamespacedName, u); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	spec, _ := u.Object["spec"].(map[string]any)
	str := func(path ...string) string { s, _, _ := unstructured.NestedString(spec, path...); return s }
	finalizer, dropped := sqlFinalizers[gvk]
	if u.GetDeletionTimestamp() != nil {
		if !dropped || !controllerutil.ContainsFinalizer(u, finalizer) {
			return reconcile.Result{}, nil
		}
		if err := op.drop(ctx, gvk, req.NamespacedName, str); err != nil {
			return reconcile.Result{}, err
		}
		controllerutil.RemoveFinalizer(u, finalizer)
		return reconcile.Result{}, op.client.Update(ctx, u)
	}
	if dropped && controllerutil.AddFinalizer(u, finalizer) {
		// Like mariadb-operator's, a deleted User drops its user, and a
		// deleted Grant revokes its privileges.
		if err := op.client.Update(ctx, u); err != nil {
			return reconcile.Result{}, err
		}
	}
	ref := types.NamespacedName{Namespace: cmp.Or(str("mariaDbRef", "namespace"), u.GetNamespace()), Name: str("mariaDbRef", "name")}
	db, err := op.server(ctx, ref)
	if err != nil {
		return reconcile.Result{RequeueAfter: notYet}, nil
	}
	switch gvk {
	case render.DatabaseGVK:
		_, err = db.ExecContext(ctx, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s CHARACTER SET %s COLLATE %s",
			quoteIdent(str("name")), quoteIdent(cmp.Or(str("characterSet"), "utf8")), quoteIdent(cmp.Or(str("collate"), "utf8_general_ci"))))
	case render.UserGVK:
		err = op.applyUser(ctx, db, req.NamespacedName, u.GetNamespace(), str("name"), cmp.Or(str("host"), "%"), str("passwordSecretKeyRef", "name"), str("passwordSecretKeyRef", "key"))
	case render.GrantGVK:
		privs, _, _ := unstructured.NestedStringSlice(spec, "privileges")
		for _, p := range privs {
			if !privileges.MatchString(p) {
				return reconcile.Result{}, fmt.Errorf("%s %s: spec.privileges: %q is not a privilege", gvk.Kind, req.NamespacedName, p)
			}
		}
		_, err = db.ExecContext(ctx, fmt.Sprintf("GRANT %s ON %s.%s TO ?@?", strings.Join(privs, ", "), quoteIdent(str("database")), tableIdent(cmp.Or(str("table"), "*"))),
			str("username"), cmp.Or(str("host"), "%"))
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("%s %s: %w", gvk.Kind, req.NamespacedName, err)
	}
	changed, err := stack.SetReady(u, "applied to the MariaDB server by the real node's mariadb-operator stand-in")
	if err != nil || !changed {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, op.client.Status().Update(ctx, u)
}

// sqlFinalizers hold the Users and Grants until the stand-in has undone
// them in SQL, as mariadb-operator's finalizers do.
var sqlFinalizers = map[schema.GroupVersionKind]string{
	render.UserGVK:  "user.k8s.mariadb.com/finalizer",
	render.GrantGVK: "grant.k8s.mariadb.com/finalizer",
}

// drop undoes a deleted User (DROP USER) or Grant (REVOKE) in its server;
// a server that is gone has nothing left to undo.
func (op *mariadbOperator) drop(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName, str func(...string) string) error {
	ref := types.NamespacedName{Namespace: cmp.Or(str("mariaDbRef", "namespace"), key.Namespace), Name: str("mariaDbRef", "name")}
	db, err := op.server(ctx, ref)
	if err != nil {
		var m unstructured.Unstructured
		m.SetGroupVersionKind(render.MariaDBGVK)
		if getErr := op.client.Get(ctx, ref, &m); apierrors.IsNotFound(getErr) || (getErr == nil && m.GetDeletionTimestamp() != nil) {
			return nil
		}
		return err
	}
	switch gvk {
	case render.UserGVK:
		_, err = db.ExecContext(ctx, "DROP USER IF EXISTS ?@?", str("name"), cmp.Or(str("host"), "%"))
		op.mu.Lock()
		delete(op.passwords, key)
		op.mu.Unlock()
	case render.GrantGVK:
		_, err = db.ExecContext(ctx, fmt.Sprintf("REVOKE ALL PRIVILEGES ON %s.%s FROM ?@?", quoteIdent(str("database")), tableIdent(cmp.Or(str("table"), "*"))),
			str("username"), cmp.Or(str("host"), "%"))
		var myErr *mysql.MySQLError
		if errors.As(err, &myErr) && (myErr.Number == 1141 || myErr.Number == 1147) {
			// No such grant, or no such user: nothing to revoke.
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("%s %s: undo: %w", gvk.Kind, key, err)
	}
	return nil
}

// applyUser creates the user, or sets its password when its Secret's, or
// the user it names, changed since it last did: a User whose spec.name
// changes makes that user, as mariadb-operator does.
func (op *mariadbOperator) applyUser(ctx context.Context, db *sql.DB, key types.NamespacedName, ns, name, host, secretName, secretKey string) error {
	secret := &corev1.Secret{}
	if err := op.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: secretName}, secret); err != nil {
		return fmt.Errorf("spec.passwordSecretKeyRef: %w", err)
	}
	password, ok := secret.Data[secretKey]
	if !ok {
		return fmt.Errorf("spec.passwordSecretKeyRef: Secret %s has no key %q", secretName, secretKey)
	}
	sum := sha256.Sum256(append([]byte(name+"@"+host+"\x00"), password...))
	digest := hex.EncodeToString(sum[:])
	op.mu.Lock()
	applied := op.passwords[key] == digest
	op.mu.Unlock()
	if applied {
		return nil
	}
	if _, err := db.ExecContext(ctx, "CREATE USER IF NOT EXISTS ?@? IDENTIFIED BY ?", name, host, string(password)); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "ALTER USER ?@? IDENTIFIED BY ?", name, host, string(password)); err != nil {
		return err
	}
	op.mu.Lock()
	op.passwords[key] = digest
	op.mu.Unlock()
	return nil
}

// usersOfSecret maps a Secret to the Users whose password it holds.
func (op *mariadbOperator) usersOfSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	users := &unstructured.UnstructuredList{}
	users.SetGroupVersionKind(render.UserGVK.GroupVersion().WithKind(render.UserGVK.Kind + "List"))
	if err := op.client.List(ctx, users, client.InNamespace(secret.GetNamespace())); err != nil {
		if !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Error(err, "list Users")
		}
		return nil
	}
	var reqs []reconcile.Request
	for _, u := range users.Items {
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "passwordSecretKeyRef", "name"); name == secret.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&u)})
		}
	}
	return reqs
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func tableIdent(s string) string {
	if s == "*" {
		return s
	}
	return quoteIdent(s)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
