package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// Namespace creates a namespace named after the test, deleted when it ends.
func (e *Env) Namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-")
	t.Cleanup(func() {
		_ = e.CS.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if err := e.CreateNamespace(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// CreateNamespace creates a namespace and waits for its default
// ServiceAccount, which pods need.
func (e *Env) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.CS.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.CS.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("namespace %s has no default ServiceAccount: %w", name, err)
	}
	return nil
}

// Restricted is the restricted Pod Security profile's container context.
func Restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ProbePod is a pod running netprobe once with args.
func (e *Env) ProbePod(name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "netprobe",
				Image:           e.Netprobe,
				Args:            args,
				SecurityContext: Restricted(),
			}},
		},
	}
}

// RunPod creates pod in ns and waits until it ends; it returns the phase
// and the log.
func (e *Env) RunPod(t *testing.T, ns string, pod *corev1.Pod) (corev1.PodPhase, string) {
	t.Helper()
	ctx := t.Context()
	if _, err := e.CS.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.CS.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}); err != nil {
		t.Fatalf("pod %s/%s did not end (phase %q): %v%s", ns, pod.Name, phase, err, e.PodEvents(ctx, ns, pod.Name))
	}
	return phase, e.PodLog(t, ns, pod.Name)
}

// PodLog is the log of a pod's only (or first) container.
func (e *Env) PodLog(t *testing.T, ns, name string) string {
	t.Helper()
	b, err := e.CS.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, name, err)
	}
	return string(b)
}

// PodEvents describes a pod's events, for a failure message.
func (e *Env) PodEvents(ctx context.Context, ns, name string) string {
	list, err := e.CS.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return "\n(events: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, ev := range list.Items {
		fmt.Fprintf(&b, "\n  %s %s: %s", ev.Type, ev.Reason, ev.Message)
	}
	return b.String()
}

// WaitPodReady waits until a pod is Ready and returns it.
func (e *Env) WaitPodReady(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.CS.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return PodReady(p), nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s not Ready: %w%s", ns, name, err, e.PodEvents(ctx, ns, name))
	}
	return pod, nil
}

// PodReady reports a pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WebServer runs netprobe serve behind a ClusterIP Service named name and
// waits until its pod is Ready; it returns the ClusterIP.
func (e *Env) WebServer(t *testing.T, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "web",
				Image:           e.Netprobe,
				Args:            []string{"serve", "-addr", ":8080"},
				Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
				SecurityContext: Restricted(),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	_, svc, err := e.ServePod(t.Context(), ns, pod, corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080)})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// ServePod creates pod behind a ClusterIP Service of its name on ports,
// selecting it by the label app=<name>, and waits until the pod is Ready;
// it returns both.
func (e *Env) ServePod(ctx context.Context, ns string, pod *corev1.Pod, ports ...corev1.ServicePort) (*corev1.Pod, *corev1.Service, error) {
	labels := map[string]string{"app": pod.Name}
	pod.Labels = labels
	if _, err := e.CS.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	svc, err := e.CS.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: ports},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, err
	}
	ready, err := e.WaitPodReady(ctx, ns, pod.Name)
	return ready, svc, err
}
