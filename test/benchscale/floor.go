package benchscale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// The control-plane floor is how long the same cluster takes to bring up
// what n Glances run on, applied directly with no operator: per Glance the
// three user Secrets, the config ConfigMap, the backends and connection
// Secrets, the Deployment (rendered as the operator renders it), its
// Service, and the db-sync Job; done when every Deployment is available
// and every Job complete. On a small machine the API server, not the
// operator, sets the pace, and this is that pace.

// floorPoll is how often the floor's completion is looked at.
const floorPoll = 500 * time.Millisecond

// measureFloor returns the floor of n Glances on a fresh cluster of nodes
// kwok nodes in dir: for each Glance, sorted, the seconds from the start of
// the apply until its Deployment was seen available and its Job complete.
func measureFloor(ctx context.Context, o Options, dir string, n, nodes int) (_ []float64, err error) {
	if err := controlplane.StopRecorded(dir); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	cluster, err := controlplane.StartCluster(ctx, controlplane.ClusterOptions{Dir: dir, Nodes: nodes})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cluster.Stop()) }()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cl, err := operatortest.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	// Pods need the namespace's default ServiceAccount.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("the default ServiceAccount of %s: %w", namespace, err)
	}
	objs := make([][]client.Object, n)
	for i := range n {
		if objs[i], err = floorObjectsOf(i); err != nil {
			return nil, err
		}
	}
	o.say("%d Glances: control-plane floor: applying %d objects directly ...", n, n*len(objs[0]))
	start := time.Now()
	if err := parallel(ctx, n, func(i int) error {
		for _, obj := range objs[i] {
			if err := cl.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	timeout, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	up := map[string]float64{}
	if err := wait.PollUntilContextCancel(timeout, floorPoll, true, func(ctx context.Context) (bool, error) {
		return floorUp(ctx, cl, start, up, n)
	}); err != nil {
		return nil, fmt.Errorf("the floor's Deployments and Jobs: %w", err)
	}
	times := slices.Sorted(maps.Values(up))
	return times, nil
}

// floorObjectsOf renders what the i-th Glance runs on.
func floorObjectsOf(i int) ([]client.Object, error) {
	objs := objectsOf(i)
	var secrets []client.Object
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok {
			secrets = append(secrets, s)
		}
	}
	name, glance := glanceName(i), glanceOf(i)
	facts := render.WorkloadFacts{ConfigMapName: name + "-config", BackendsSecretName: name + "-backends"}
	d, err := render.Deployment(glance, facts)
	if err != nil {
		return nil, err
	}
	job, err := render.DatabaseJob(glance, facts, render.DBSync, "")
	if err != nil {
		return nil, err
	}
	meta := func(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: namespace, Name: n} }
	return append(secrets,
		&corev1.ConfigMap{ObjectMeta: meta(facts.ConfigMapName), Data: map[string]string{"glance-api.conf": "[DEFAULT]\n"}},
		&corev1.Secret{ObjectMeta: meta(facts.BackendsSecretName), StringData: map[string]string{"backends.conf": "[DEFAULT]\n"}},
		&corev1.Secret{ObjectMeta: meta(name + "-db-connection"), StringData: map[string]string{"connection": "mysql+pymysql://"}},
		d, render.Service(glance), job,
	), nil
}

// floorUp records in up, by Glance, the seconds since start at which its
// Deployment was first seen available with its Job complete, and reports
// whether all n are.
func floorUp(ctx context.Context, cl client.Client, start time.Time, up map[string]float64, n int) (bool, error) {
	var deployments appsv1.DeploymentList
	if err := cl.List(ctx, &deployments, client.InNamespace(namespace)); err != nil {
		return false, nil
	}
	var jobs batchv1.JobList
	if err := cl.List(ctx, &jobs, client.InNamespace(namespace)); err != nil {
		return false, nil
	}
	now := time.Since(start).Seconds()
	complete := map[string]bool{}
	for _, j := range jobs.Items {
		if j.Status.Succeeded > 0 {
			complete[j.Labels[render.LabelInstance]] = true
		}
	}
	for _, d := range deployments.Items {
		name := d.Labels[render.LabelInstance]
		if _, seen := up[name]; seen || !complete[name] {
			continue
		}
		if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= ptr.Deref(d.Spec.Replicas, 1) {
			up[name] = now
		}
	}
	return len(up) >= n, nil
}

// floorDir is where the floor's cluster of count n keeps its state.
func floorDir(root string, n int) string { return filepath.Join(root, fmt.Sprintf("floor-%d", n)) }
