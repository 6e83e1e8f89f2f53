package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/testhost"
)

// A stack with Options.HelmInstall installs the chart as a platform team
// would, with the Helm SDK and the real cert-manager, and runs the two
// binaries as processes standing in for the chart's pods, which kwok
// accepts but does not run: with the arguments the rendered Deployments
// carry, as the chart's ServiceAccounts, the webhook serving the
// certificate cert-manager issued. The API server reaches the webhook as it
// would in a cluster: through the chart's Service, whose EndpointSlice
// points at a test host (a network namespace; endpoints may not be
// loopback) that forwards to the webhook process, verified with the CA
// cainjector put into the webhook configurations.

// A `helm upgrade` puts the Service's selector back: the Service must be
// pointed at the test host again before anything reaches the webhook, or
// the API server dials kwok's pod addresses.

// webhookHostSubnet is the test host's /30. One Helm-install stack runs on
// a machine at a time.
var webhookHostSubnet = netip.MustParsePrefix("10.244.253.0/30")

// webhookHostName names the test host's network namespace.
const webhookHostName = "glance-stack"

// helmConfiguration is the Helm SDK's client for the cluster, as the admin.
func (s *Stack) helmConfiguration() (*action.Configuration, error) {
	return chart.Configuration(s.Kubeconfig, OperatorNamespace)
}

// helmAction is what each Helm action takes: the client and the chart.
func (s *Stack) helmAction() (*action.Configuration, *helmchart.Chart, error) {
	cfg, err := s.helmConfiguration()
	if err != nil {
		return nil, nil, err
	}
	c, err := chart.Load()
	return cfg, c, err
}

// InstallChart runs `helm install` of the chart with values as release
// ReleaseName in OperatorNamespace.
func (s *Stack) InstallChart(values map[string]any) (*release.Release, error) {
	return chart.InstallRelease(s.Kubeconfig, OperatorNamespace, values)
}

// installedDeployment returns the installed release's Deployment of a
// component.
func (s *Stack) installedDeployment(ctx context.Context, cl client.Client, component string) (*appsv1.Deployment, error) {
	var list appsv1.DeploymentList
	if err := cl.List(ctx, &list, client.InNamespace(OperatorNamespace), client.MatchingLabels{componentLabel: component, "app.kubernetes.io/instance": chart.ReleaseName}); err != nil {
		return nil, err
	}
	if len(list.Items) != 1 || len(list.Items[0].Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("the release has %d Deployments of %s, want 1", len(list.Items), component)
	}
	return &list.Items[0], nil
}

// installedDeploymentArgs returns the container arguments of the installed
// chart's Deployment of a component.
func (s *Stack) installedDeploymentArgs(ctx context.Context, cl client.Client, component string) ([]string, error) {
	d, err := s.installedDeployment(ctx, cl, component)
	if err != nil {
		return nil, err
	}
	return d.Spec.Template.Spec.Containers[0].Args, nil
}

// startInstalledWebhook serves the installed webhook: it waits for the
// serving certificate cert-manager issues and keeps the process's cert-dir
// in step with its Secret (as the kubelet does with a Secret volume), runs
// the binary with its Deployment's arguments, and points the chart's
// Service at it through a test host.
func (s *Stack) startInstalledWebhook(ctx context.Context, bin string, cl client.Client) error {
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := cl.Get(ctx, client.ObjectKey{Name: chart.ReleaseName}, validating); err != nil {
		return fmt.Errorf("the release's ValidatingWebhookConfiguration: %w", err)
	}
	ref := validating.Webhooks[0].ClientConfig.Service
	if ref == nil {
		return fmt.Errorf("the release's webhooks name no Service")
	}
	service := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	deployment, err := s.installedDeployment(ctx, cl, webhookComponent)
	if err != nil {
		return err
	}
	pod := deployment.Spec.Template.Spec
	args := pod.Containers[0].Args
	secretName, err := certDirSecret(pod)
	if err != nil {
		return err
	}

	certDir := filepath.Join(s.Dir, "webhook-certs")
	var secret corev1.Secret
	if err := s.poll(ctx, "cert-manager to issue the webhook's serving certificate", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: OperatorNamespace, Name: secretName}, &secret); err != nil {
			return false, err
		}
		return len(secret.Data[corev1.TLSCertKey]) > 0 && len(secret.Data[corev1.TLSPrivateKeyKey]) > 0, nil
	}); err != nil {
		return err
	}
	if err := writeServingFiles(certDir, &secret); err != nil {
		return err
	}
	syncCtx, stopSync := context.WithCancel(context.WithoutCancel(ctx))
	s.stopCertSync = stopSync
	go s.syncServingFiles(syncCtx, cl, secretName, certDir)

	port, err := s.runWebhook(ctx, bin, args, certDir, 0)
	if err != nil {
		return err
	}
	if s.webhookHost, err = testhost.New(webhookHostName, webhookHostSubnet); err != nil {
		return err
	}
	var svc corev1.Service
	if err := cl.Get(ctx, client.ObjectKey(service), &svc); err != nil {
		return fmt.Errorf("the webhook Service: %w", err)
	}
	if len(svc.Spec.Ports) != 1 {
		return fmt.Errorf("the webhook Service %s has %d ports, want 1", service, len(svc.Spec.Ports))
	}
	servicePort := svc.Spec.Ports[0]
	// The forwarder listens where a pod would: the container port the
	// Service targets.
	var containerPort int32
	for _, p := range pod.Containers[0].Ports {
		if p.Name == servicePort.TargetPort.String() || p.ContainerPort == servicePort.TargetPort.IntVal {
			containerPort = p.ContainerPort
		}
	}
	if containerPort == 0 {
		return fmt.Errorf("the webhook Deployment has no container port for the Service's target %s", servicePort.TargetPort.String())
	}
	if err := s.webhookHost.Forward(int(containerPort), fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		return err
	}
	s.WebhookEndpoint = netip.AddrPortFrom(s.webhookHost.Address, uint16(containerPort)).String()
	if err := s.pointServiceAtTestHost(ctx, cl, &svc, servicePort, containerPort); err != nil {
		return err
	}
	return s.waitWebhookCalled(ctx, cl)
}

// certDirSecret is the Secret a webhook pod mounts at its --cert-dir.
func certDirSecret(pod corev1.PodSpec) (string, error) {
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.Name == v.Name && slices.Contains(pod.Containers[0].Args, "--cert-dir="+m.MountPath) {
				return v.Secret.SecretName, nil
			}
		}
	}
	return "", fmt.Errorf("the webhook Deployment mounts no Secret at its --cert-dir")
}

// pointServiceAtTestHost makes the test host the webhook Service's only
// endpoint: the selector goes (kwok's pods serve nothing), and an
// EndpointSlice of the Service names the host's address.
func (s *Stack) pointServiceAtTestHost(ctx context.Context, cl client.Client, svc *corev1.Service, port corev1.ServicePort, containerPort int32) error {
	if err := cl.Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"selector":null}}`))); err != nil {
		return fmt.Errorf("detach the webhook Service from kwok's pods: %w", err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-processes", Namespace: svc.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc.Name,
			discoveryv1.LabelManagedBy:   "glance-operator-test-stack",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{s.webhookHost.Address.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port.Name), Port: ptr.To(containerPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := cl.Create(ctx, slice); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("point the webhook Service at the test host: %w", err)
	}
	// Without its selector the Service keeps the Endpoints the endpoints
	// controller made from kwok's pods, mirrored into an EndpointSlice, and
	// the API server would pick their addresses, which lead nowhere on this
	// machine: delete both, and wait for ours to be the only slice.
	return s.poll(ctx, "the webhook Service to have only the test host as endpoint", time.Minute, func(ctx context.Context) (bool, error) {
		legacy := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
		if err := cl.Delete(ctx, legacy); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete the Endpoints of kwok's pods: %w", err)
		}
		var slices discoveryv1.EndpointSliceList
		if err := cl.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			return false, err
		}
		only := true
		for i := range slices.Items {
			if sl := &slices.Items[i]; sl.Name != slice.Name {
				only = false
				if err := cl.Delete(ctx, sl); err != nil && !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("delete EndpointSlice %s of kwok's pods: %w", sl.Name, err)
				}
			}
		}
		return only && len(slices.Items) == 1, nil
	})
}

// writeServingFiles writes the Secret's certificate and key into dir, each
// by rename, so the webhook never reads half a file.
func writeServingFiles(dir string, secret *corev1.Secret) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, key := range []string{corev1.TLSPrivateKeyKey, corev1.TLSCertKey} {
		tmp := filepath.Join(dir, "."+key)
		if err := os.WriteFile(tmp, secret.Data[key], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, key)); err != nil {
			return err
		}
	}
	return nil
}

// syncServingFiles rewrites the served files whenever cert-manager renews
// the Secret, until ctx ends.
func (s *Stack) syncServingFiles(ctx context.Context, cl client.Client, name, dir string) {
	var last []byte
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		var secret corev1.Secret
		if err := cl.Get(ctx, client.ObjectKey{Namespace: OperatorNamespace, Name: name}, &secret); err == nil {
			if cert := secret.Data[corev1.TLSCertKey]; len(cert) > 0 && !bytes.Equal(cert, last) {
				if err := writeServingFiles(dir, &secret); err == nil {
					last = cert
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// UpgradeChart runs `helm upgrade` of the release with values.
func (s *Stack) UpgradeChart(values map[string]any) (*release.Release, error) {
	cfg, c, err := s.helmAction()
	if err != nil {
		return nil, err
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = OperatorNamespace
	upgrade.Timeout = 2 * time.Minute
	if values == nil {
		values = map[string]any{}
	}
	rel, err := upgrade.Run(chart.ReleaseName, c, values)
	if err != nil {
		return nil, fmt.Errorf("helm upgrade: %w", err)
	}
	return rel, nil
}

// UninstallChart runs `helm uninstall` of the release. Stop the binaries
// first (StopBinaries), as deleting their pods would: their identities go
// with the release.
func (s *Stack) UninstallChart() (*release.UninstallReleaseResponse, error) {
	cfg, err := s.helmConfiguration()
	if err != nil {
		return nil, err
	}
	uninstall := action.NewUninstall(cfg)
	uninstall.Timeout = 2 * time.Minute
	resp, err := uninstall.Run(chart.ReleaseName)
	if err != nil {
		return nil, fmt.Errorf("helm uninstall: %w", err)
	}
	return resp, nil
}

// StopBinaries stops both binaries and what serves the webhook's
// certificate and address, as deleting the chart's pods would.
func (s *Stack) StopBinaries() error {
	var errs []error
	for _, p := range []**controlplane.Process{&s.manager, &s.webhook} {
		if *p != nil {
			errs = append(errs, (*p).Stop(30*time.Second))
			*p = nil
		}
	}
	if s.stopCertSync != nil {
		s.stopCertSync()
		s.stopCertSync = nil
	}
	if s.webhookHost != nil {
		errs = append(errs, s.webhookHost.Close())
		s.webhookHost = nil
	}
	return errors.Join(errs...)
}

// RollOut replaces both binaries with new runs from the installed
// release, as a rollout replaces the pods: the arguments of its
// Deployments as they are now, fresh tokens of its ServiceAccounts (a
// reinstall makes new ones), and the webhook Service pointed at the test
// host again (an upgrade puts its selector back).
func (s *Stack) RollOut(ctx context.Context) error {
	if err := s.StopBinaries(); err != nil {
		return err
	}
	cl, err := operatortest.NewClient(s.Config)
	if err != nil {
		return err
	}
	ids, err := renderChartIdentities()
	if err != nil {
		return err
	}
	s.generation++
	if err := s.applyIdentities(ctx, ids, cl, false); err != nil {
		return err
	}
	if err := s.startInstalledWebhook(ctx, s.bins.webhook, cl); err != nil {
		return err
	}
	args, err := s.installedDeploymentArgs(ctx, cl, managerComponent)
	if err != nil {
		return err
	}
	return s.startManager(ctx, s.bins.manager, s.healthcheckAddress, args, s.managerExtraArgs)
}
