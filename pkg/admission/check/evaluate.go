// Package check is `glance-webhook check`: it judges Glance and
// GlanceBackend manifests offline and gives the verdict the cluster gives, in
// the API server's own order: (1) decoding (unknown fields, structural-schema
// defaults), (2) the mutating webhook, then the schema defaults again,
// (3) structural schema and CEL validation of the defaulted object against
// the generated CRDs with the API server's libraries, (4) the validating
// webhook. The webhooks are the very handlers the admission server serves,
// called in-process; cross-object rules are judged against the other objects
// of the input.
package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission/schema"
	"github.com/c5c3/glance-operator/pkg/admission/webhook"
)

// Document is one object of the input and where it came from.
type Document struct {
	// Source is "<file>#<index of the document in the file>".
	Source string
	Object *unstructured.Unstructured
}

// Result is the verdict on one Glance or GlanceBackend.
type Result struct {
	Source    string   `json:"source"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Allowed   bool     `json:"allowed"`
	Errors    []string `json:"errors"`
	Warnings  []string `json:"warnings"`
}

// Evaluator judges documents. It is safe for one goroutine at a time.
type Evaluator struct {
	schemas *schema.Set
	scheme  *runtime.Scheme
	match   webhookMatch
}

// NewEvaluator loads the embedded CRDs.
func NewEvaluator() (*Evaluator, error) {
	schemas, err := schema.Load()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return &Evaluator{schemas: schemas, scheme: scheme, match: newWebhookMatch()}, nil
}

// DefaultNamespace is the namespace of a document that names none, as kubectl
// with a default context would use.
const DefaultNamespace = "default"

// Evaluate judges the documents in order, the way `kubectl apply` would
// create them one after another. The cluster state starts as olds (the
// stored objects, status included) and every allowed document joins it, so a
// document whose kind, namespace and name is already in the state is judged
// as an update of that object, and the cross-object rules see exactly the
// objects that would exist at that point: the stored ones and the ones before
// it in the input. Only Glance and GlanceBackend documents get a Result;
// other kinds (PriorityClasses) join the state as they come.
func (e *Evaluator) Evaluate(ctx context.Context, docs, olds []Document) []Result {
	st := newState()
	// The handlers read the state as it grows, like the server's read the
	// cluster.
	handlers := webhook.Handlers(e.scheme, st)
	for _, d := range olds {
		st.put(d.Object)
	}
	var results []Result
	for _, d := range docs {
		if d.Object.GroupVersionKind().Group != v1alpha1.GroupVersion.Group {
			st.put(d.Object)
			continue
		}
		r, stored := e.evaluate(ctx, d, st.get(d.Object), handlers)
		if r.Allowed {
			st.put(stored)
		}
		results = append(results, r)
	}
	return results
}

func key(u *unstructured.Unstructured) string {
	ns := u.GetNamespace()
	if ns == "" {
		ns = DefaultNamespace
	}
	return u.GroupVersionKind().GroupKind().String() + "/" + ns + "/" + u.GetName()
}

func (e *Evaluator) evaluate(ctx context.Context, d Document, oldDoc *unstructured.Unstructured, handlers map[string]*crwebhook.Webhook) (Result, *unstructured.Unstructured) {
	gvk := d.Object.GroupVersionKind()
	r := Result{Source: d.Source, Kind: gvk.Kind, Namespace: d.Object.GetNamespace(), Name: d.Object.GetName(), Errors: []string{}, Warnings: []string{}}
	if r.Namespace == "" {
		r.Namespace = DefaultNamespace
	}
	deny := func(msgs ...string) (Result, *unstructured.Unstructured) {
		r.Allowed = false
		r.Errors = append(r.Errors, msgs...)
		return r, nil
	}
	kind, ok := e.schemas.For(gvk)
	if !ok {
		return deny(fmt.Sprintf("no kind %q is served in version %q of %s", gvk.Kind, gvk.Version, gvk.Group))
	}

	// (1) Decoding: strict field validation, then the schema defaults.
	in := d.Object.DeepCopy()
	in.SetNamespace(r.Namespace)
	decoded, err := kind.Decode(in.Object)
	if err != nil {
		return deny(statusMessages(err)...)
	}
	obj := &unstructured.Unstructured{Object: decoded}
	var old *unstructured.Unstructured
	op := admissionv1.Create
	if oldDoc != nil {
		stored, err := kind.Decode(oldDoc.Object)
		if err != nil {
			return deny(prefixAll("the stored object: ", statusMessages(err))...)
		}
		old = &unstructured.Unstructured{Object: stored}
		op = admissionv1.Update
		// An update names the version it replaces, as kubectl does.
		if old.GetResourceVersion() == "" {
			old.SetResourceVersion("1")
		}
		obj.SetResourceVersion(old.GetResourceVersion())
	}
	mutatePath, validatePath := webhook.MutateGlancePath, webhook.ValidateGlancePath
	if gvk.Kind == "GlanceBackend" {
		mutatePath, validatePath = webhook.MutateGlanceBackendPath, webhook.ValidateGlanceBackendPath
	}

	// The webhooks' match conditions: a write that cannot change a verdict
	// skips both webhooks.
	calls := func() (bool, error) { return e.match.calls(ctx, gvk, admission.Operation(op), obj, old) }

	// (2) The mutating webhook, then the schema defaults again.
	call, err := calls()
	if err != nil {
		return deny(err.Error())
	}
	resp := crwebhook.Allowed("")
	if call {
		resp = handlers[mutatePath].Handle(ctx, request(gvk, op, obj, old))
	}
	r.Warnings = append(r.Warnings, resp.Warnings...)
	if !resp.Allowed {
		return deny(causes(resp.Result)...)
	}
	if len(resp.Patch) > 0 {
		patched, err := applyPatch(obj, resp.Patch)
		if err != nil {
			return deny("applying the mutating webhook's patch: " + err.Error())
		}
		defaulted, err := kind.Default(patched.Object)
		if err != nil {
			return deny(err.Error())
		}
		obj = &unstructured.Unstructured{Object: defaulted}
	}

	// (3) Structural schema and CEL, with the store's preparation (a create
	// drops status, an update keeps the stored one).
	var oldObject map[string]any
	if old != nil {
		oldObject = old.Object
	}
	if errs := kind.Validate(ctx, obj.Object, oldObject); len(errs) > 0 {
		return deny(causes(&kind.Invalid(obj.GetName(), errs).ErrStatus)...)
	}

	// (4) The validating webhook.
	if call, err = calls(); err != nil {
		return deny(err.Error())
	}
	resp = crwebhook.Allowed("")
	if call {
		resp = handlers[validatePath].Handle(ctx, request(gvk, op, obj, old))
	}
	r.Warnings = append(r.Warnings, resp.Warnings...)
	if !resp.Allowed {
		return deny(causes(resp.Result)...)
	}
	r.Allowed = true
	if old == nil {
		delete(obj.Object, "status")
	} else if st, ok := old.Object["status"]; ok {
		obj.Object["status"] = st
	}
	return r, obj
}

// statusMessages renders an error the API server would answer with.
func statusMessages(err error) []string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		return causes(&st)
	}
	return []string{err.Error()}
}

func request(gvk k8sschema.GroupVersionKind, op admissionv1.Operation, obj, old *unstructured.Unstructured) crwebhook.Request {
	req := crwebhook.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("offline-check"),
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Name:      obj.GetName(),
		Namespace: obj.GetNamespace(),
		Operation: op,
		Object:    runtime.RawExtension{Raw: mustJSON(obj)},
	}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(old)}
	}
	return req
}

func mustJSON(u *unstructured.Unstructured) []byte {
	data, err := json.Marshal(u.Object)
	if err != nil {
		// Decoded YAML/JSON always re-encodes.
		panic(err)
	}
	return data
}

func applyPatch(obj *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	data, err := p.Apply(mustJSON(obj))
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	return out, json.Unmarshal(data, &out.Object)
}

// causes renders a denial as the API server shows it: one "<field>:
// <message>" line per cause, or the message when there are none.
func causes(st *metav1.Status) []string {
	if st == nil {
		return []string{"denied"}
	}
	if st.Details == nil || len(st.Details.Causes) == 0 {
		return []string{st.Message}
	}
	out := make([]string, 0, len(st.Details.Causes))
	for _, c := range st.Details.Causes {
		out = append(out, FormatCause(c))
	}
	return out
}

// FormatCause renders one cause of an Invalid error.
func FormatCause(c metav1.StatusCause) string {
	if c.Field == "" {
		return c.Message
	}
	return c.Field + ": " + c.Message
}

func prefixAll(prefix string, msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = prefix + m
	}
	return out
}

// builtinPriorityClasses exist in every cluster.
var builtinPriorityClasses = []string{"system-cluster-critical", "system-node-critical"}

// state is the simulated cluster: objects by kind, namespace and name. It
// answers the admission lookups.
type state struct {
	objects map[string]*unstructured.Unstructured
}

func newState() *state { return &state{objects: map[string]*unstructured.Unstructured{}} }

func (s *state) put(u *unstructured.Unstructured) { s.objects[key(u)] = u }

func (s *state) get(u *unstructured.Unstructured) *unstructured.Unstructured {
	return s.objects[key(u)]
}

func (s *state) Backends(_ context.Context, namespace, glance, _ string) ([]v1alpha1.GlanceBackend, error) {
	var out []v1alpha1.GlanceBackend
	for _, u := range s.objects {
		if u.GroupVersionKind() != v1alpha1.GroupVersion.WithKind("GlanceBackend") {
			continue
		}
		var b v1alpha1.GlanceBackend
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
			return nil, fmt.Errorf("GlanceBackend %s: %w", u.GetName(), err)
		}
		if b.Namespace == "" {
			b.Namespace = DefaultNamespace
		}
		if b.Namespace == namespace && b.Spec.GlanceRef.Name == glance {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *state) PriorityClassExists(_ context.Context, name string) (bool, error) {
	for _, b := range builtinPriorityClasses {
		if name == b {
			return true, nil
		}
	}
	pc := &unstructured.Unstructured{}
	pc.SetGroupVersionKind(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"))
	pc.SetName(name)
	_, ok := s.objects[key(pc)]
	return ok, nil
}
