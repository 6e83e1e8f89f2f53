package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// reviewKinds are the AdmissionReviews the server judges: v1, the version
// the webhook configurations ask for, and v1beta1, the same type under its
// older name, which controller-runtime answers in kind.
var reviewKinds = map[schema.GroupVersionKind]bool{
	admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"):      true,
	admissionv1beta1.SchemeGroupVersion.WithKind("AdmissionReview"): true,
}

// reviewHandler serves one webhook over HTTP, in place of controller-
// runtime's Webhook.ServeHTTP: that judges a review of any apiVersion and
// kind, so an admission.k8s.io/v9 review was answered allowed. The body is
// decoded in one pass (controller-runtime's decoder makes two: one for the
// apiVersion and kind, one for the rest), its apiVersion and kind are
// checked, and the review is judged by the webhook's Handle.
//
// A request that is not an AdmissionReview this server speaks is answered
// with its HTTP error status: the API server gets no verdict in a version
// it did not ask for. A review it speaks is always answered 200 with the
// verdict, in the request's version.
type reviewHandler struct {
	hook *cradmission.Webhook
}

func (h reviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req cradmission.Request
	gvk, status, err := decodeReview(r, &req.AdmissionRequest)
	if err != nil {
		if rec, ok := r.Context().Value(reviewRecordKey{}).(*reviewRecord); ok {
			rec.refusal = err
		}
		resp := cradmission.Errored(int32(status), err)
		resp.UID = req.UID
		writeReview(w, status, admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"), &resp.AdmissionResponse)
		return
	}
	resp := h.hook.Handle(r.Context(), req)
	writeReview(w, http.StatusOK, gvk, &resp.AdmissionResponse)
}

// decodeReview reads the AdmissionReview of r into req and returns its
// apiVersion and kind, or the HTTP status and the error refusing it.
func decodeReview(r *http.Request, req *admissionv1.AdmissionRequest) (schema.GroupVersionKind, int, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return schema.GroupVersionKind{}, http.StatusBadRequest, errors.New("request body is empty")
	}
	defer r.Body.Close()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return schema.GroupVersionKind{}, http.StatusBadRequest, fmt.Errorf("content type %q, want application/json", ct)
	}
	if r.ContentLength > maxReviewSize {
		return schema.GroupVersionKind{}, http.StatusRequestEntityTooLarge, fmt.Errorf("request body of %d bytes is larger than the %d a review of the largest object etcd stores takes", r.ContentLength, maxReviewSize)
	}
	body, err := readBody(r)
	if err != nil {
		return schema.GroupVersionKind{}, http.StatusBadRequest, fmt.Errorf("read the request body: %w", err)
	}
	if len(body) > maxReviewSize {
		return schema.GroupVersionKind{}, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is larger than the %d bytes a review of the largest object etcd stores takes", maxReviewSize)
	}

	// Case-sensitive, as the API machinery decodes; Request points into
	// req so the request is not copied.
	review := admissionv1.AdmissionReview{Request: req}
	if err := utiljson.Unmarshal(body, &review); err != nil {
		return schema.GroupVersionKind{}, http.StatusBadRequest, fmt.Errorf("decode the AdmissionReview: %w", err)
	}
	gvk := review.GroupVersionKind()
	if !reviewKinds[gvk] {
		return gvk, http.StatusBadRequest, fmt.Errorf("apiVersion %q kind %q is not an AdmissionReview this server speaks (admission.k8s.io/v1, admission.k8s.io/v1beta1)", clip(review.APIVersion), clip(review.Kind))
	}
	if review.Request == nil {
		return gvk, http.StatusBadRequest, errors.New("the AdmissionReview has no request")
	}
	return gvk, http.StatusOK, nil
}

// readBody reads the body of r, up to one byte past maxReviewSize so that a
// body at the bound is told from a larger one. A body of known length is
// read into a buffer of that size: the API server always sends the length.
func readBody(r *http.Request) ([]byte, error) {
	limited := io.LimitReader(r.Body, maxReviewSize+1)
	if r.ContentLength <= 0 {
		return io.ReadAll(limited)
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(limited, body); err != nil {
		return nil, err
	}
	// net/http ends the body at its Content-Length, so this is EOF.
	var extra [1]byte
	if n, _ := limited.Read(extra[:]); n > 0 {
		return nil, errors.New("request body is longer than its Content-Length")
	}
	return body, nil
}

// writeReview writes resp as an AdmissionReview of gvk. A write error means
// the client has gone; there is no one left to tell.
func writeReview(w http.ResponseWriter, status int, gvk schema.GroupVersionKind, resp *admissionv1.AdmissionResponse) {
	review := admissionv1.AdmissionReview{Response: resp}
	review.SetGroupVersionKind(gvk)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(&review)
}

// clip shortens a string a client sent before it goes into the response and
// the log; the body may hold megabytes.
func clip(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "..."
}
