package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/validation"
	"github.com/flotilla-io/flotilla/internal/crdstate"
)

// What apply and delete did with an object, as kubectl says it.
const (
	actionCreated    = "created"
	actionConfigured = "configured"
	actionUnchanged  = "unchanged"
	actionDeleted    = "deleted"
	actionNotFound   = "not found"
)

// Kinds apply treats first: a Namespace before what lives in it, a CRD
// before its objects.
var (
	namespaceKind = schema.GroupKind{Kind: "Namespace"}
	crdKind       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	crdResource   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// crdEstablishTimeout bounds the wait for a CRD applied with its objects
// to be served.
const crdEstablishTimeout = 30 * time.Second

// serverSetFields are the metadata fields the API server sets: a document
// copied from "get -o yaml" carries them, and apply leaves them out.
var serverSetFields = []string{
	"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink",
	"deletionTimestamp", "deletionGracePeriodSeconds",
}

// object is one manifest as the hub will see it: in Flotilla's API group
// when it was Karmada's, with its resource, its namespace and the body to
// send.
type object struct {
	m   manifest
	gvk schema.GroupVersionKind
	// body is the document to apply: converted, server-set metadata and
	// status left out, metadata.namespace set for a namespaced kind.
	body *unstructured.Unstructured
	// mapping is the kind's resource, nil while the kind waits for a CRD
	// of the same input.
	mapping    *meta.RESTMapping
	namespaced bool
	// unchecked says why the hub cannot dry-run the object before the
	// others are applied (its CRD or its namespace is in the same input),
	// or is empty.
	unchecked string
	// before is the object on the hub before the apply (nil: none).
	before *unstructured.Unstructured
}

// key identifies the object on the hub: group, kind, namespace, name.
func (o *object) key() string {
	return o.gvk.Group + "/" + o.gvk.Kind + "/" + o.body.GetNamespace() + "/" + o.body.GetName()
}

// resource is the dynamic client of the object's resource and namespace.
func (o *object) resource(c *hubClients) dynamic.ResourceInterface {
	ri := c.dynamic.Resource(o.mapping.Resource)
	if o.namespaced {
		return ri.Namespace(o.body.GetNamespace())
	}
	return ri
}

// action is what "kubectl apply" would say: created, configured or
// unchanged, comparing the object before with after.
func (o *object) action(after *unstructured.Unstructured) string {
	if o.before == nil {
		return actionCreated
	}
	if equality.Semantic.DeepEqual(comparable(o.before), comparable(after)) {
		return actionUnchanged
	}
	return actionConfigured
}

// comparable is u without what changes on every write.
func comparable(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	return c.Object
}

// convert checks an object's API group and kind before anything is sent,
// and turns Karmada's documents into Flotilla's (same field names):
// policy.karmada.io/v1alpha1 PropagationPolicy, ClusterPropagationPolicy
// and ClusterTaintPolicy become flotilla.io/v1alpha1, apps.karmada.io/v1alpha1 WorkloadRebalancer
// becomes apps.flotilla.io/v1alpha1. Of Flotilla's (and Karmada's) own
// groups only those kinds may be applied; everything else is a template.
func convert(m manifest) (schema.GroupVersionKind, *field.Error) {
	gv, err := schema.ParseGroupVersion(m.apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, field.Invalid(field.NewPath("apiVersion"), m.apiVersion, err.Error())
	}
	gvk := gv.WithKind(m.kind)
	policyKinds := []string{v1alpha1.KindPropagationPolicy, v1alpha1.KindClusterPropagationPolicy, v1alpha1.KindClusterTaintPolicy}
	switch {
	case validation.IsPolicyAPIVersion(m.apiVersion):
		if !slices.Contains(policyKinds, m.kind) {
			return gvk, field.NotSupported(field.NewPath("kind"), m.kind, policyKinds)
		}
		return v1alpha1.SchemeGroupVersion.WithKind(m.kind), nil
	case validation.IsRebalancerAPIVersion(m.apiVersion):
		if m.kind != appsv1alpha1.KindWorkloadRebalancer {
			return gvk, field.NotSupported(field.NewPath("kind"), m.kind, []string{appsv1alpha1.KindWorkloadRebalancer})
		}
		return appsv1alpha1.SchemeGroupVersion.WithKind(m.kind), nil
	case validation.IsHubGroup(gv.Group):
		return gvk, field.Forbidden(field.NewPath("apiVersion"), "the hub's own kinds are not propagated as templates")
	}
	return gvk, nil
}

// convertAll converts every manifest; the problems are the input's.
func convertAll(manifests []manifest) ([]schema.GroupVersionKind, []problem) {
	gvks := make([]schema.GroupVersionKind, len(manifests))
	var problems []problem
	for i, m := range manifests {
		gvk, err := convert(m)
		if err != nil {
			problems = append(problems, problem{where: m.where(), what: err.Error()})
		}
		gvks[i] = gvk
	}
	return gvks, problems
}

// resolver turns converted manifests into objects against the hub: the
// resource of each kind (from discovery, or from a CRD of the input), its
// scope and namespace.
type resolver struct {
	c *hubClients
	// namespace is where namespaced objects without one go: -n, else the
	// kubeconfig context's.
	namespace string
	// crds are the kinds the input's CRDs define, with whether each is
	// namespaced.
	crds map[schema.GroupKind]bool
	// namespaces are the Namespaces the input creates.
	namespaces map[string]bool
	// unservedIsMissing: a kind the hub does not serve is no problem but
	// an object without a mapping (delete: it cannot exist).
	unservedIsMissing bool
}

func newResolver(c *hubClients, namespace string, manifests []manifest, gvks []schema.GroupVersionKind) *resolver {
	r := &resolver{c: c, namespace: namespace, crds: map[schema.GroupKind]bool{}, namespaces: map[string]bool{}}
	for i, m := range manifests {
		switch gvks[i].GroupKind() {
		case namespaceKind:
			r.namespaces[m.name] = true
		case crdKind:
			u, err := m.unstructured()
			if err != nil {
				continue
			}
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
			if group != "" && kind != "" {
				r.crds[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
			}
		}
	}
	return r
}

// resolve makes the objects. Problems are about single objects (no such
// kind on the hub, a namespace on a cluster-scoped kind, the same object
// twice, a missing namespace); an error is a failure to ask the hub.
func (r *resolver) resolve(ctx context.Context, manifests []manifest, gvks []schema.GroupVersionKind) ([]*object, []problem, error) {
	objects := make([]*object, 0, len(manifests))
	var problems []problem
	seen := map[string]*object{}
	for i, m := range manifests {
		o, p, err := r.object(m, gvks[i])
		if err != nil {
			return nil, nil, err
		}
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		if first, dup := seen[o.key()]; dup {
			problems = append(problems, problem{where: m.where(), what: field.Duplicate(field.NewPath("metadata", "name"), m.name).Error() +
				" (the same object as " + first.m.where() + ")"})
			continue
		}
		seen[o.key()] = o
		objects = append(objects, o)
	}
	ps, err := r.checkNamespaces(ctx, objects)
	return objects, append(problems, ps...), err
}

// object resolves one manifest.
func (r *resolver) object(m manifest, gvk schema.GroupVersionKind) (*object, *problem, error) {
	body, err := m.unstructured()
	if err != nil {
		return nil, &problem{where: m.where(), what: err.Error()}, nil
	}
	body.SetAPIVersion(gvk.GroupVersion().String())
	for _, f := range serverSetFields {
		unstructured.RemoveNestedField(body.Object, "metadata", f)
	}
	delete(body.Object, "status")
	o := &object{m: m, gvk: gvk, body: body}
	mapping, err := r.c.mapping(gvk)
	switch {
	case meta.IsNoMatchError(err) && r.unservedIsMissing:
		return o, nil, nil
	case meta.IsNoMatchError(err):
		namespaced, ok := r.crds[gvk.GroupKind()]
		if !ok {
			return nil, &problem{where: m.where(), what: fmt.Sprintf(
				"kind: Not found: %q: the hub serves no kind %s in %s (apply its CustomResourceDefinition first?)",
				gvk.Kind, gvk.Kind, gvk.GroupVersion())}, nil
		}
		o.namespaced = namespaced
		o.unchecked = "its CustomResourceDefinition is applied by this run"
	case err != nil:
		return nil, nil, fmt.Errorf("finding the resource of %s: %w", kindName(gvk.GroupKind()), err)
	default:
		o.mapping = mapping
		o.namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
	}
	switch {
	case o.namespaced && body.GetNamespace() == "":
		body.SetNamespace(r.namespace)
	case !o.namespaced && body.GetNamespace() != "":
		return nil, &problem{where: m.where(), what: field.Forbidden(field.NewPath("metadata", "namespace"),
			kindName(gvk.GroupKind())+" is cluster-scoped").Error()}, nil
	}
	return o, nil, nil
}

// checkNamespaces reads every namespace the objects go to: a missing one
// is a problem, unless the input creates it (its objects are then
// unchecked until it exists).
func (r *resolver) checkNamespaces(ctx context.Context, objects []*object) ([]problem, error) {
	exists := map[string]bool{}
	var problems []problem
	for _, o := range objects {
		if !o.namespaced {
			continue
		}
		ns := o.body.GetNamespace()
		found, checked := exists[ns]
		if !checked {
			_, err := r.c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, fmt.Errorf("reading namespace %q: %w", ns, err)
			default:
				found = true
			}
			exists[ns] = found
		}
		switch {
		case found:
		case r.namespaces[ns]:
			if o.unchecked == "" {
				o.unchecked = "its namespace is created by this run"
			}
		default:
			problems = append(problems, problem{where: o.m.where(), what: field.NotFound(field.NewPath("metadata", "namespace"), ns).Error() +
				": no such namespace on the hub; create it first, or apply a Namespace document with the objects"})
		}
	}
	return problems, nil
}

// readBefore reads the object as the hub has it now, nil when it has none.
func (o *object) readBefore(ctx context.Context, c *hubClients) error {
	u, err := o.resource(c).Get(ctx, o.body.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		o.before = nil
		return nil
	case err != nil:
		return err
	}
	o.before = u
	return nil
}

// serverSideApply applies the object with field manager flotilla, without
// forcing conflicts, or only has the hub check it (dryRun).
func (o *object) serverSideApply(ctx context.Context, c *hubClients, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.ApplyOptions{FieldManager: fieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return o.resource(c).Apply(ctx, o.body.GetName(), o.body, opts)
}

// answerProblems turns the hub's refusal of one object into problems
// about it: one per cause of an Invalid answer (the field and what is
// wrong with it), else the answer's message. ok is false for an error
// that is not an answer of the hub (it could not be reached).
func answerProblems(where string, err error) ([]problem, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil, false
	}
	st := status.Status()
	if apierrors.IsInvalid(err) && st.Details != nil && len(st.Details.Causes) > 0 {
		problems := make([]problem, 0, len(st.Details.Causes))
		for _, c := range st.Details.Causes {
			problems = append(problems, problem{where: where, what: fieldMessage(c.Field, c.Message)})
		}
		return problems, true
	}
	msg := st.Message
	if apierrors.IsConflict(err) && strings.HasPrefix(msg, "Apply failed") {
		msg += " (fields another field manager owns: change them with that manager, or leave them out of the document)"
	}
	return []problem{{where: where, what: msg}}, true
}

// fieldMessage is "field: message", or the message alone without a field.
func fieldMessage(field, msg string) string {
	if field == "" {
		return msg
	}
	return field + ": " + strings.TrimPrefix(msg, field+": ")
}

// writeActions prints one line per object that has an action, as kubectl
// does: "deployment.apps/nginx created".
func writeActions(w io.Writer, objects []*object, actions []string) error {
	var b strings.Builder
	for i, o := range objects {
		if actions[i] != "" {
			fmt.Fprintf(&b, "%s/%s %s\n", kindGroup(o.gvk), o.body.GetName(), actions[i])
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// kindGroup is the lower-case kind and, for a kind with an API group, the
// group: "deployment.apps", "configmap".
func kindGroup(gvk schema.GroupVersionKind) string {
	s := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		s += "." + gvk.Group
	}
	return s
}

// waitEstablished waits until the CRD name is Established and discovery
// maps its kind (the API server updates discovery a moment after the
// condition), so that the objects of that kind applied next find it.
func waitEstablished(ctx context.Context, c *hubClients, name string) error {
	err := poll(ctx, crdEstablishTimeout, func(ctx context.Context) (bool, error) {
		u, err := c.dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !crdstate.Established(u) {
			return false, nil
		}
		c.invalidateMapper() // discovery is read again from here on
		gvk, ok := servedKind(u)
		if !ok {
			return true, nil // no served version: nothing to map
		}
		if _, err := c.mapping(gvk); meta.IsNoMatchError(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
	if errors.Is(err, errWaitTimedOut) {
		return fmt.Errorf("customresourcedefinition %s is not served %s after it was applied", name, crdEstablishTimeout)
	}
	return err
}

// servedKind is the kind a CRD defines, in its first served version.
func servedKind(crd *unstructured.Unstructured) (schema.GroupVersionKind, bool) {
	gk := crdstate.Kind(crd)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		version, _ := v.(map[string]any)
		if served, _ := version["served"].(bool); served && gk.Kind != "" {
			if name, _ := version["name"].(string); name != "" {
				return gk.WithVersion(name), true
			}
		}
	}
	return schema.GroupVersionKind{}, false
}
