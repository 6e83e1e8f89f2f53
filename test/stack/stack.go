// Package stack runs the whole product on a full local cluster: the cluster
// of test/controlplane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok), glance-operator and glance-webhook built from this
// repository and run as processes, the webhook registered with the API
// server, and small in-process stand-ins for the operators the product talks
// to (mariadb-operator, External Secrets, a Gateway controller). The two
// binaries run under the ServiceAccounts and RBAC of the Helm chart, not as
// cluster-admin; the stand-ins and the callers' clients are cluster-admin.
// `make run` (hack/localcluster) and the e2e suite (test/e2e) start it.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/testhost"
)

// OperatorNamespace is the namespace the manager is told it runs in
// (--operator-namespace); the stack creates it.
const OperatorNamespace = "glance-system"

// Options configure a stack.
type Options struct {
	// Dir holds the cluster's state, the webhook certificates, every log
	// (Dir/logs) and the PID file. Processes a killed stack recorded there
	// are stopped first; the caller clears stale state. Empty means a new
	// temporary directory, removed by Stop.
	Dir string
	// Nodes is the number of kwok fake nodes; 0 means 2.
	Nodes int
	// KwokStages are extra kwok Stage files on top of the default stages.
	KwokStages []string
	// ManagerArgs are extra glance-operator flags.
	ManagerArgs []string
	// LogLevel is both binaries' --log-level; empty keeps their default.
	LogLevel string
	// Progress, when set, receives a line per start-up step.
	Progress io.Writer
	// HelmInstall installs the chart with the Helm SDK, with the real
	// cert-manager issuing the webhook's certificate, and runs the binaries
	// as the chart's Deployments would (see helm.go), instead of applying
	// only the chart's RBAC and registering the webhook by URL.
	HelmInstall bool
	// AuditManager gives kube-apiserver an audit log of glance-operator's
	// requests, those of its ServiceAccount's user only, at
	// Cluster.AuditLog (see controlplane.ClusterOptions.AuditUsers).
	AuditManager bool
}

// Stack is a running cluster with the operator, the webhook and the
// stand-ins.
type Stack struct {
	// Dir is the state directory; LogDir holds every component's log.
	Dir, LogDir string
	// Cluster is the local cluster; Kubeconfig and Config are its
	// cluster-admin credentials, which the stand-ins and the suites' clients
	// use.
	Cluster    *controlplane.Cluster
	Kubeconfig string
	Config     *rest.Config
	// ManagerServiceAccount and WebhookServiceAccount are the identities
	// glance-operator and glance-webhook run as: the ServiceAccounts of the
	// chart's Deployments, with the chart's RBAC applied.
	ManagerServiceAccount, WebhookServiceAccount types.NamespacedName
	// ManagerKubeconfig and WebhookKubeconfig are the binaries'
	// kubeconfigs, authenticating with a token of their ServiceAccount.
	ManagerKubeconfig, WebhookKubeconfig string
	// ManagerLog and WebhookLog are the binaries' logs, in LogDir.
	ManagerLog, WebhookLog string
	// WebhookEndpoint is where a Helm-installed stack's API server reaches
	// the webhook: the test host's address and the container port.
	WebhookEndpoint string
	// ManagerMetricsURL is glance-operator's Prometheus endpoint.
	ManagerMetricsURL string
	// WebhookMetricsURL is glance-webhook's Prometheus endpoint.
	WebhookMetricsURL string

	// front is the binaries' way to the API server, as a load balancer
	// would be: RestartAPIServer closes it until the new server is ready.
	front *frontDoor
	// webhookPort and webhookCertDir are where the webhook registered by
	// URL serves, for StartWebhook; webhookRestarts counts those starts.
	webhookPort     int
	webhookCertDir  string
	webhookRestarts int
	// mu guards manager and webhook against Check while KillManager,
	// StopWebhook and StartWebhook replace them.
	mu               sync.Mutex
	manager, webhook *controlplane.Process
	// managerBaseArgs are the arguments of the manager's last start, for
	// a start after KillManager or StopManager; managerRestarts counts those
	// starts.
	managerBaseArgs []string
	managerRestarts int
	// binaryLogs are the logs of every run of the two binaries; a rolled
	// out stack runs them again under new names (processName).
	binaryLogs []string
	generation int
	bins       binaries
	// managerExtraArgs are Options.ManagerArgs (after Options.LogLevel's
	// flag), for runs after a rollout.
	managerExtraArgs []string
	// logLevelFlag is Options.LogLevel's flag, or none.
	logLevelFlag       []string
	healthcheckAddress string
	webhookHost        *testhost.Host
	stopCertSync       func()
	standIns           *StandInManager
	standInRestarts    int
	healthcheck        *http.Server
	targets            []*Target
	tempDir            bool
}

// Start builds the binaries, starts the cluster, applies the chart's
// ServiceAccounts and RBAC, starts the stand-ins, the webhook and the
// manager (each binary as its chart ServiceAccount), and returns once the
// API server calls the webhook and the manager's caches are synced. On
// error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	// Fail before building anything when the control plane is not built
	// or the chart does not render.
	if _, err := controlplane.BinDir(controlplane.ClusterBinaries...); err != nil {
		return nil, err
	}
	ids, err := renderChartIdentities()
	if err != nil {
		return nil, err
	}
	s := &Stack{Dir: opts.Dir, managerExtraArgs: opts.ManagerArgs}
	if opts.LogLevel != "" {
		s.logLevelFlag = []string{"--log-level=" + opts.LogLevel}
		s.managerExtraArgs = append(slices.Clone(s.logLevelFlag), s.managerExtraArgs...)
	}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "glance-stack-"); err != nil {
			return nil, err
		}
		s.tempDir = true
	} else {
		if s.Dir, err = filepath.Abs(s.Dir); err != nil {
			return nil, err
		}
		// A killed run recorded its processes in the same directory.
		if err := controlplane.StopRecorded(s.Dir); err != nil {
			return nil, err
		}
	}
	s.LogDir = filepath.Join(s.Dir, "logs")
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	say := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}

	// The build and the cluster's start-up overlap: each takes seconds.
	say("building glance-operator and glance-webhook into bin/ ...")
	built := make(chan error, 1)
	go func() {
		var err error
		s.bins, err = build(ctx)
		built <- err
	}()
	crds := controlplane.AllCRDs
	if opts.HelmInstall {
		say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and cert-manager ...")
		crds.Glance = false // the chart installs them
	} else {
		say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok ...")
	}
	clusterOpts := controlplane.ClusterOptions{
		Dir: s.Dir, Nodes: opts.Nodes, CRDs: crds, KwokStages: opts.KwokStages, CertManager: opts.HelmInstall,
	}
	if opts.AuditManager {
		// The manager authenticates with a token of the chart's
		// ServiceAccount (applyIdentities), known from the rendered chart
		// before the cluster starts.
		clusterOpts.AuditUsers = []string{ServiceAccountUser(ids.manager)}
	}
	s.Cluster, err = controlplane.StartCluster(ctx, clusterOpts)
	buildErr := <-built
	if err != nil {
		return nil, errors.Join(err, buildErr)
	}
	if buildErr != nil {
		return nil, buildErr
	}
	s.Kubeconfig, s.Config = s.Cluster.Kubeconfig, s.Cluster.Config
	if s.front, err = newFrontDoor(s.Config.Host); err != nil {
		return nil, err
	}

	cl, err := operatortest.NewClient(s.Config)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", OperatorNamespace, err)
	}
	if opts.HelmInstall {
		say("installing the chart with the Helm SDK ...")
		if _, err := s.InstallChart(nil); err != nil {
			return nil, err
		}
		say("minting the binaries' tokens for the chart's ServiceAccounts ...")
	} else {
		say("applying the chart's ServiceAccounts and RBAC, and minting the binaries' tokens ...")
	}
	if err := s.applyIdentities(ctx, ids, cl, !opts.HelmInstall); err != nil {
		return nil, err
	}

	say("starting the stand-ins: mariadb-operator, External Secrets, Gateway controller, glance-api /healthcheck ...")
	if s.standIns, err = startStandIns(ctx, s.Config, s.LogDir, "stand-ins"); err != nil {
		return nil, err
	}
	if s.healthcheckAddress, err = s.startHealthcheck(); err != nil {
		return nil, err
	}

	var managerArgs []string
	if opts.HelmInstall {
		say("starting glance-webhook as %s with its Deployment's arguments, behind the chart's Service ...", ServiceAccountUser(s.WebhookServiceAccount))
		if err := s.startInstalledWebhook(ctx, s.bins.webhook, cl); err != nil {
			return nil, err
		}
		if managerArgs, err = s.installedDeploymentArgs(ctx, cl, managerComponent); err != nil {
			return nil, err
		}
	} else {
		say("starting glance-webhook as %s and registering it with the API server ...", ServiceAccountUser(s.WebhookServiceAccount))
		if err := s.startWebhook(ctx, s.bins.webhook, cl); err != nil {
			return nil, err
		}
	}
	say("starting glance-operator as %s ...", ServiceAccountUser(s.ManagerServiceAccount))
	if err := s.startManager(ctx, s.bins.manager, s.healthcheckAddress, managerArgs, s.managerExtraArgs); err != nil {
		return nil, err
	}
	return s, nil
}

// Check returns an error when the manager or the webhook has exited, with
// the last lines of its log, or has logged an RBAC denial, with the denied
// lines: a wait on the operator should fail at once rather than time out,
// and a watch the chart's roles deny stalls the manager for good.
func (s *Stack) Check() error {
	var errs []error
	s.mu.Lock()
	running := []*controlplane.Process{s.manager, s.webhook}
	s.mu.Unlock()
	for _, p := range running {
		if p != nil {
			errs = append(errs, p.Exited())
		}
	}
	denials, err := s.RBACDenials()
	switch {
	case err != nil:
		errs = append(errs, err)
	case len(denials) > 0:
		errs = append(errs, fmt.Errorf("the API server denied glance-operator or glance-webhook a call the chart's roles do not grant:\n%s",
			strings.Join(denials[:min(len(denials), maxDenialsReported)], "\n")))
	}
	return errors.Join(errs...)
}

// maxDenialsReported bounds the denied lines Check reports; the logs hold
// the rest.
const maxDenialsReported = 5

// Stop stops the manager, the webhook, the stand-ins and the cluster, in
// that order, and removes a temporary state directory. It is safe to call
// more than once.
func (s *Stack) Stop() error {
	errs := []error{s.StopBinaries()}
	for _, t := range s.targets {
		errs = append(errs, t.Stop())
	}
	s.targets = nil
	if s.standIns != nil {
		errs = append(errs, s.standIns.Stop())
		s.standIns = nil
	}
	if s.healthcheck != nil {
		errs = append(errs, s.healthcheck.Close())
		s.healthcheck = nil
	}
	if s.front != nil {
		s.front.close()
		s.front = nil
	}
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Stop())
		s.Cluster = nil
	}
	if s.tempDir {
		errs = append(errs, os.RemoveAll(s.Dir))
		s.tempDir = false
	}
	return errors.Join(errs...)
}

// processName names a run of a binary: its log and PID record. The first
// run has the binary's name; runs after a rollout are numbered.
func (s *Stack) processName(binary string) string {
	if s.generation == 0 {
		return binary
	}
	return fmt.Sprintf("%s-%d", binary, s.generation+1)
}

// StopRecorded stops the processes a stack recorded in dir, newest first
// (the operator's binaries, then the cluster): the clean-up after a run
// that was killed without stopping its stack.
func StopRecorded(dir string) error { return controlplane.StopRecorded(dir) }

// poll waits up to timeout for cond, failing early when the manager or the
// webhook has died or been denied a call (Check).
func (s *Stack) poll(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := s.Check(); err != nil {
			return false, err
		}
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w; last error: %v", err, last)
		}
		return fmt.Errorf("waiting for %s: %w (logs in %s)", what, err, s.LogDir)
	}
	return nil
}

// getOK reports whether url answers 200.
func getOK(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return true, nil
}
