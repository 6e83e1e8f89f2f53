package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// Where, in the cluster's directory, kube-apiserver's audit policy and log
// go when ClusterOptions.AuditUsers is set.
const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "logs/kube-apiserver-audit.log"
)

// auditPolicy logs the requests of users at level Metadata (who did what
// to which object, and the answer; no bodies) and nothing else. Omitting
// RequestReceived leaves one event per request, at ResponseComplete, and
// for a long-running request (a watch) one more at ResponseStarted, when
// it is opened.
func auditPolicy(users []string) ([]byte, error) {
	return yaml.Marshal(auditv1.Policy{
		TypeMeta:   metav1.TypeMeta{APIVersion: auditv1.SchemeGroupVersion.String(), Kind: "Policy"},
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelMetadata, Users: users},
			{Level: auditv1.LevelNone},
		},
	})
}

// auditArgs writes the audit policy of users into dir and returns
// kube-apiserver's flags for it and the log's path.
func auditArgs(dir string, users []string) (args []string, log string, err error) {
	policy, err := auditPolicy(users)
	if err != nil {
		return nil, "", err
	}
	policyPath := filepath.Join(dir, auditPolicyFile)
	if err := os.WriteFile(policyPath, policy, 0o644); err != nil {
		return nil, "", fmt.Errorf("write the audit policy: %w", err)
	}
	log = filepath.Join(dir, auditLogFile)
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		return nil, "", err
	}
	return []string{
		"--audit-policy-file=" + policyPath,
		"--audit-log-path=" + log,
		"--audit-log-format=json",
		"--audit-log-version=" + auditv1.SchemeGroupVersion.String(),
		// Blocking: each event is written before its request's response
		// completes, so none is dropped however many arrive at once, and a
		// reader sees every request already answered. Metadata events are
		// small; the write costs little next to the request's own.
		"--audit-log-mode=blocking",
		// One file, never rotated, so a reader can follow it by offset.
		"--audit-log-maxsize=0",
	}, log, nil
}
