package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/debianroot"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/realnode"
)

// realNodeNamespace and realNodeRelease are the sample Glance's.
const (
	realNodeNamespace = "openstack"
	realNodeRelease   = "2026.1"
)

// realNodeRun is a real-node cluster with the chart installed and the
// sample Glance's scene set.
type realNodeRun struct {
	env   *realnode.Env
	scene *realnode.Scene
	stop  func() error
}

// startRealNode starts a real node, installs the chart with helm, starts
// the MariaDB stand-in and sets the scene of a sample Glance on 2026.1
// with an S3 backend and Debian's Keystone in the namespace openstack.
func startRealNode(ctx context.Context, dir string) (*realNodeRun, error) {
	fmt.Println("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a real node (containerd, kubelet, kube-proxy, CoreDNS, kube-network-policies, cert-manager) ...")
	env, err := realnode.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	fmt.Printf("cluster up in %s; images from the registry at %s\n", env.Startup.Round(100*time.Millisecond), env.Cluster.Registry.Host)
	r := &realNodeRun{env: env, stop: env.Stop}
	fail := func(err error) (*realNodeRun, error) { return nil, errors.Join(err, r.stop()) }
	// The MariaDB stand-in, a controller-runtime manager, sets the
	// process's controller-runtime logger: it starts before any client.
	fmt.Println("building the SeaweedFS, MariaDB, Keystone and Glance images ...")
	imgs, err := env.PushSceneImages(ctx, debianroot.Glance, []string{realNodeRelease})
	if err != nil {
		return fail(err)
	}
	stopMariaDB, err := realnode.StartMariaDBOperator(ctx, env.Cluster.Config, imgs.MariaDB, filepath.Join(dir, "logs"))
	if err != nil {
		return fail(err)
	}
	r.stop = func() error { return errors.Join(stopMariaDB(), env.Stop()) }
	cl, err := operatortest.NewClient(env.Cluster.Config)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("installing the chart with helm install %s --version %s ...\n", env.Release.Chart, env.Release.ChartVersion)
	took, err := env.InstallChart(ctx)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("glance-operator and glance-webhook available %s after helm install\n", took.Round(100*time.Millisecond))
	if err := realnode.CreateSecretStore(ctx, cl); err != nil {
		return fail(err)
	}
	if err := env.CreateNamespace(ctx, realNodeNamespace); err != nil {
		return fail(err)
	}
	if r.scene, err = env.SetScene(ctx, cl, realNodeNamespace, imgs); err != nil {
		return fail(err)
	}
	if err := cl.Create(ctx, r.scene.NewGlance(imgs, realNodeRelease)); err != nil {
		return fail(err)
	}
	fmt.Printf("running: the chart's glance-operator and glance-webhook, cert-manager, and in %s: Keystone (Debian's), SeaweedFS as the S3 server, MariaDB (its operator a stand-in in this process), Glance %s\n",
		realNodeNamespace, realNodeRelease)
	return r, nil
}

// registerImageService puts the sample Glance, which is Ready, in
// Keystone's catalog at its status.endpoint.
func registerImageService(ctx context.Context, cfg *rest.Config, s *realnode.Scene) error {
	cl, err := operatortest.NewClient(cfg)
	if err != nil {
		return err
	}
	g := &v1alpha1.Glance{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: realnode.GlanceName}, g); err != nil {
		return err
	}
	return s.RegisterImageService(ctx, g.Status.Endpoint)
}

// printUpload prints how to upload an image to the sample Glance from this
// machine: its Services' ClusterIPs route to the node's bridge.
func printUpload(ctx context.Context, cfg *rest.Config, s *realnode.Scene) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ips := map[string]string{}
	for _, name := range []string{realnode.KeystoneName, realnode.GlanceName} {
		svc, err := cs.CoreV1().Services(s.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ips[name] = svc.Spec.ClusterIP
	}
	fmt.Printf(`
Glance serves at http://%[2]s:%[3]d (Service %[1]s/glance); Keystone at http://%[4]s:%[5]d/v3
(Service %[1]s/keystone; its administrator %[9]s, password %[10]s, project %[11]s).
Upload an image as the user %[6]s (password %[7]s, project %[8]s):

  TOKEN=$(curl -si http://%[4]s:%[5]d/v3/auth/tokens -H 'Content-Type: application/json' \
    -d '{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"%[6]s","domain":{"name":"Default"},"password":"%[7]s"}}},"scope":{"project":{"name":"%[8]s","domain":{"name":"Default"}}}}}' \
    | awk 'tolower($1) == "x-subject-token:" { print $2 }' | tr -d '\r')
  ID=$(curl -s http://%[2]s:%[3]d/v2/images -H "X-Auth-Token: $TOKEN" -H 'Content-Type: application/json' \
    -d '{"name":"hello","disk_format":"raw","container_format":"bare"}' | grep -o '"id": *"[^"]*"' | cut -d'"' -f4)
  curl -s -X PUT http://%[2]s:%[3]d/v2/images/$ID/file -H "X-Auth-Token: $TOKEN" \
    -H 'Content-Type: application/octet-stream' --data-binary @README.md
  curl -s http://%[2]s:%[3]d/v2/images/$ID/file -H "X-Auth-Token: $TOKEN" | sha256sum; sha256sum README.md
`, s.Namespace, ips[realnode.GlanceName], v1alpha1.APIPort, ips[realnode.KeystoneName], realnode.KeystonePort, realnode.DemoUser, realnode.DemoPassword, realnode.DemoProject,
		realnode.KeystoneAdminUser, realnode.KeystoneAdminPassword, realnode.KeystoneAdminProject)
	return nil
}
