package controlplane

import (
	"fmt"
	"strings"
)

// FailingPodStage returns a kwok Stage that fails, instead of completing,
// the running pods matching every expression: their containers exit 1, the
// way a crashed command would. Each expression is one YAML flow mapping of
// spec.selector.matchExpressions, e.g.
// `{key: .metadata.namespace, operator: In, values: ["doomed"]}`.
// Its weight wins over the default stages, so the failure is deterministic.
func FailingPodStage(name string, expressions ...string) string {
	b := podStage(name, append(expressions, `{key: .status.phase, operator: In, values: ["Running"]}`))
	b.WriteString(`
      {{ $now := Now }}
` + terminatedContainers(1) + `      phase: Failed
`)
	return b.String()
}

// terminatedContainers is the containerStatuses of a stage that ends each
// container of the pod with exitCode; the stage's template defines $now.
func terminatedContainers(exitCode int) string {
	return fmt.Sprintf(`      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: %d
            reason: Error
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
`, exitCode)
}

// EvictedPodStage returns a kwok Stage that evicts the running pods
// matching every expression (written as for FailingPodStage) the way the
// kubelet does: phase Failed, reason Evicted, the kubelet's message (e.g.
// for an emptyDir over its sizeLimit), no longer Ready, each container
// killed. Its weight wins over the default stages.
func EvictedPodStage(name, message string, expressions ...string) string {
	b := podStage(name, append(expressions, `{key: .status.phase, operator: In, values: ["Running"]}`))
	fmt.Fprintf(b, `
      {{ $now := Now }}
      conditions:
      - {lastTransitionTime: {{ $now | Quote }}, status: "False", type: Ready, reason: PodFailed}
      - {lastTransitionTime: {{ $now | Quote }}, status: "False", type: ContainersReady, reason: PodFailed}
%s      phase: Failed
      reason: Evicted
      message: %q
`, terminatedContainers(137), message)
	return b.String()
}

// ReadyPodStage returns a kwok Stage that starts the pending pods matching
// every expression (written as for FailingPodStage) at podIP instead of an
// address of the node's pod range: Running, Ready, each container running.
// Pointed at a test host, the pods' endpoints then lead to a real server.
// Its weight wins over the default stages.
func ReadyPodStage(name, podIP string, expressions ...string) string {
	b := podStage(name, append(expressions,
		`{key: .status.phase, operator: In, values: ["Pending"]}`,
		`{key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ["True"]}`))
	fmt.Fprintf(b, `
      {{ $now := Now }}
      conditions:
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}
      {{ end }}
      {{ with NodeIPsWith .spec.nodeName }}
      hostIP: {{ index . 0 | Quote }}
      {{ end }}
      podIP: %[1]q
      podIPs:
      - ip: %[1]q
      phase: Running
      startTime: {{ $now | Quote }}
`, podIP)
	return b.String()
}

// podStage starts a pod Stage of the given selector expressions (pods not
// being deleted), with a weight that wins over the default stages, up to
// its status template, which the caller writes.
func podStage(name string, expressions []string) *strings.Builder {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: %s
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
`, name)
	for _, e := range append(expressions, `{key: .metadata.deletionTimestamp, operator: DoesNotExist}`) {
		fmt.Fprintf(&b, "    - %s\n", e)
	}
	b.WriteString(`  weight: 10000
  next:
    statusTemplate: |`)
	return &b
}
