package webhook

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Verdicts, the values of the verdict label.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
	// VerdictError is a review that could not be judged in full: an
	// undecodable request, a handler failure, or a failed lookup that made
	// the rules fail closed.
	VerdictError = "error"
	// VerdictThrottled is a review refused, unread, with 429: the reviews
	// in flight were at MaxInFlightBytes.
	VerdictThrottled = "throttled"
)

// reviewRecord carries what logging and metrics need from a review from
// inside the webhook (where the request is decoded) out to instrument.
type reviewRecord struct {
	handled   bool
	uid       types.UID
	kind      string
	name      string
	namespace string
	operation admissionv1.Operation
	allowed   bool
	result    *metav1.Status
	// refusal is why a request was not judged: not an AdmissionReview the
	// server speaks, or not decodable.
	refusal error
}

type reviewRecordKey struct{}

// recordResponse notes the request and response of each review in the
// request's reviewRecord. A review that never gets here (refused by
// reviewHandler) or panics leaves the record unhandled.
func recordResponse(next cradmission.Handler) cradmission.Handler {
	return cradmission.HandlerFunc(func(ctx context.Context, req cradmission.Request) cradmission.Response {
		resp := next.Handle(ctx, req)
		if rec, ok := ctx.Value(reviewRecordKey{}).(*reviewRecord); ok {
			*rec = reviewRecord{
				handled:   true,
				uid:       req.UID,
				kind:      req.Kind.Kind,
				name:      req.Name,
				namespace: req.Namespace,
				operation: req.Operation,
				allowed:   resp.Allowed,
				result:    resp.Result,
			}
		}
		return resp
	})
}

func (r *reviewRecord) verdict() string {
	if !r.handled {
		return VerdictError
	}
	return verdictOf(r.allowed, r.result)
}

// verdictOf classifies an admission response.
func verdictOf(allowed bool, result *metav1.Status) string {
	if allowed {
		return VerdictAllowed
	}
	if result == nil {
		return VerdictDenied
	}
	if result.Code == http.StatusBadRequest || result.Code == http.StatusRequestEntityTooLarge || result.Code >= http.StatusInternalServerError {
		return VerdictError
	}
	if result.Details != nil {
		for _, c := range result.Details.Causes {
			if c.Type == metav1.CauseType(field.ErrorTypeInternal) {
				return VerdictError
			}
		}
	}
	return VerdictDenied
}

// logReview logs one review by its identity and verdict. It never logs the
// object or the response message, which quotes field values (an
// extraConfig value can be a password); a denial names only the fields.
func logReview(log logr.Logger, rec *reviewRecord, verdict string, elapsed time.Duration) {
	if !rec.handled {
		if rec.refusal != nil {
			log.Error(rec.refusal, "admission review refused before a verdict", "verdict", verdict, "durationSeconds", elapsed.Seconds())
			return
		}
		log.Error(errors.New("review failed before a verdict"), "admission review not judged (handler panic)", "verdict", verdict, "durationSeconds", elapsed.Seconds())
		return
	}
	if verdict == VerdictAllowed && !log.V(1).Enabled() {
		// The bulk of the reviews, logged at a level that is off: skip
		// building their fields.
		return
	}
	kv := []any{
		"uid", rec.uid, "kind", rec.kind, "name", rec.name, "namespace", rec.namespace,
		"operation", rec.operation, "verdict", verdict, "durationSeconds", elapsed.Seconds(),
	}
	if rec.result != nil && verdict != VerdictAllowed {
		kv = append(kv, "code", rec.result.Code, "reason", rec.result.Reason)
		if d := rec.result.Details; d != nil && len(d.Causes) > 0 {
			fields := make([]string, 0, len(d.Causes))
			for _, c := range d.Causes {
				fields = append(fields, string(c.Type)+" "+c.Field)
			}
			kv = append(kv, "causes", fields)
		}
	}
	switch verdict {
	case VerdictAllowed:
		// Allowed reviews are the bulk; the API server's audit log has them.
		log.V(1).Info("admission review", kv...)
	case VerdictDenied:
		log.Info("admission review", kv...)
	default:
		log.Error(errors.New("admission review failed"), "admission review", kv...)
	}
}
