// Package realnode runs suites on a real node: the local control plane with
// a kubelet on containerd and runc, the bridge CNI, kube-proxy, CoreDNS and
// kube-network-policies, every image pulled by digest from a registry on
// loopback. Pods here run real processes. test/realnode/stories checks the
// node and runs the product's stories on it.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/c5c3/glance-operator/hack/release/publish"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// Env is a real-node cluster with the suite's images pushed.
type Env struct {
	Cluster *controlplane.Cluster
	CS      kubernetes.Interface
	// Netprobe is the suite's client and server in pods, by digest.
	Netprobe string
	// Release is what `make release` published to the registry: the chart
	// and its images.
	Release publish.Release
	// Images are the released images by digest.
	Images ProductImages
	// Released is how long the release took, for reports.
	Released time.Duration
	// Startup is how long the cluster took to start, for reports.
	Startup time.Duration
}

// Start starts a real-node cluster in dir (short: containerd's socket path
// must fit a sun_path), with cert-manager as a pod and the CRDs of the kinds
// the operator talks to (the chart installs the Glance CRDs), pushes the
// netprobe image and publishes the release (make release) to the registry.
func Start(ctx context.Context, dir string) (*Env, error) {
	start := time.Now()
	crds := controlplane.AllCRDs
	crds.Glance = false
	cluster, err := controlplane.StartCluster(ctx, controlplane.ClusterOptions{Dir: dir, RealNode: true, CertManager: true, CRDs: crds})
	if err != nil {
		return nil, fmt.Errorf("start the real-node cluster: %w", err)
	}
	e := &Env{Cluster: cluster, Startup: time.Since(start)}
	fail := func(err error) (*Env, error) { return nil, errors.Join(err, cluster.Stop()) }
	if e.CS, err = kubernetes.NewForConfig(cluster.Config); err != nil {
		return fail(err)
	}
	if e.Netprobe, err = cluster.Registry.BuildAndPush(ctx, e.ImageDir(), "netprobe", "./test/realnode/netprobe", "test/netprobe", "v1"); err != nil {
		return fail(err)
	}
	released := time.Now()
	if e.Release, err = PublishRelease(ctx, cluster.Registry, filepath.Join(e.ImageDir(), "release")); err != nil {
		return fail(fmt.Errorf("make release: %w", err))
	}
	e.Released = time.Since(released)
	e.Images = ReleaseImages(e.Release)
	return e, nil
}

// ImageDir is where the suite writes image archives.
func (e *Env) ImageDir() string { return filepath.Join(e.Cluster.Dir, "images") }

// Stop stops the cluster and puts the machine back.
func (e *Env) Stop() error { return e.Cluster.Stop() }

// EmptyDirPath is where the kubelet keeps a pod's emptyDir volume on the
// node.
func (e *Env) EmptyDirPath(pod types.UID, volume string) string {
	return filepath.Join(e.Cluster.Dir, "kubelet", "pods", string(pod), "volumes", "kubernetes.io~empty-dir", volume)
}
