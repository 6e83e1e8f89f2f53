package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// finishStatus recomputes the aggregate condition, exactly the AND of the
// sub-conditions, and stamps obj's generation on the status and on the
// aggregate. A step error leaves its condition False (see
// Step.FailureReason), so the aggregate never vouches for a failed pass.
func (p *Pipeline[T, S]) finishStatus(obj T) {
	if p.Aggregate != "" {
		conds := obj.GetConditions()
		var notTrue []string
		for _, typ := range p.SubConditions {
			if !meta.IsStatusConditionTrue(conds, typ) {
				notTrue = append(notTrue, typ)
			}
		}
		if len(notTrue) == 0 {
			SetCondition(obj, p.Aggregate, metav1.ConditionTrue, ReasonAllReady,
				"All sub-conditions are True.")
		} else {
			SetCondition(obj, p.Aggregate, metav1.ConditionFalse, ReasonNotAllReady,
				"Not True: "+strings.Join(notTrue, ", ")+".")
		}
	}
	obj.SetObservedGeneration(obj.GetGeneration())
}

// Reasons of the aggregate condition; the same strings as
// v1alpha1.ReasonAllReady and v1alpha1.ReasonNotAllReady, kept here so the
// pipeline does not depend on one API version.
const (
	ReasonAllReady    = "AllReady"
	ReasonNotAllReady = "NotAllReady"
)

// writeStatus writes obj's status when it differs from before (obj's status
// JSON when Run started), as a JSON merge patch of the status subresource
// holding only the status diff: spec and metadata are never sent, so the
// write can neither revert a concurrent spec edit nor conflict on
// resourceVersion.
func (p *Pipeline[T, S]) writeStatus(ctx context.Context, obj T, before json.RawMessage) error {
	after, err := statusJSON(obj)
	if err != nil {
		return err
	}
	if bytes.Equal(before, after) {
		return nil
	}
	patch, err := jsonpatch.CreateMergePatch(statusDocument(before), statusDocument(after))
	if err != nil {
		return fmt.Errorf("status merge patch: %w", err)
	}
	if err := p.Status.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// statusJSON returns the serialized "status" field of obj, nil when absent.
func statusJSON(obj any) (json.RawMessage, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("serialize object: %w", err)
	}
	var fields struct {
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("serialize object: %w", err)
	}
	return fields.Status, nil
}

func statusDocument(status json.RawMessage) []byte {
	if status == nil {
		return []byte(`{}`)
	}
	doc, _ := json.Marshal(map[string]json.RawMessage{"status": status})
	return doc
}
