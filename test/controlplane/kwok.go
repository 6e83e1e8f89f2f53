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
	for _, e := range append(expressions,
		`{key: .metadata.deletionTimestamp, operator: DoesNotExist}`,
		`{key: .status.phase, operator: In, values: ["Running"]}`) {
		fmt.Fprintf(&b, "    - %s\n", e)
	}
	b.WriteString(`  weight: 10000
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 1
            reason: Error
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
      phase: Failed
`)
	return b.String()
}
