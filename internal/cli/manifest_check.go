package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// manifest is one object to send to the hub, with where it came from so
// that the hub's complaints about it can point there.
type manifest struct {
	origin     origin
	raw        json.RawMessage
	apiVersion string
	kind       string
	name       string
}

// where names the manifest in messages:
// "policy.yaml: document 2 (PropagationPolicy nginx-propagation)".
func (m manifest) where() string { return describeOrigin(m.origin, m.kind, m.name) }

func describeOrigin(o origin, kind, name string) string {
	var known []string
	for _, s := range []string{kind, name} {
		if s != "" {
			known = append(known, s)
		}
	}
	if len(known) == 0 {
		return o.String()
	}
	return o.String() + " (" + strings.Join(known, " ") + ")"
}

// loadManifests parses and checks every source, expanding List documents
// into their items. It reports every problem of every source, so that one
// run shows all there is to fix.
func loadManifests(sources []source) ([]manifest, []problem) {
	var (
		manifests []manifest
		problems  []problem
	)
	for _, s := range sources {
		docs, ps := parseDocuments(s)
		problems = append(problems, ps...)
		for _, d := range docs {
			ms, ps := checkDocument(d)
			manifests = append(manifests, ms...)
			problems = append(problems, ps...)
		}
	}
	return manifests, problems
}

// checkDocument checks one document: an object, or a List of objects.
func checkDocument(d document) ([]manifest, []problem) {
	obj, p := decodeObject(d.origin, d.json)
	if p != nil {
		return nil, []problem{*p}
	}
	kind, _ := stringValue(obj, "kind")
	if _, hasItems := obj["items"]; kind == "List" || (strings.HasSuffix(kind, "List") && hasItems) {
		return expandList(d.origin, obj, kind)
	}
	m, ps := checkObject(d.origin, obj, d.json)
	if len(ps) > 0 {
		return nil, ps
	}
	return []manifest{m}, nil
}

// expandList checks a List's items. A typed list (PropagationPolicyList,
// as "flotilla get policies -o yaml" writes it) may leave apiVersion and
// kind out of its items: they are filled in from the list's.
func expandList(o origin, list map[string]json.RawMessage, listKind string) ([]manifest, []problem) {
	where := describeOrigin(o, listKind, "")
	var items []json.RawMessage
	raw, ok := list["items"]
	if !ok || isNull(raw) {
		return nil, []problem{{where: where, what: field.Required(field.NewPath("items"), "").Error()}}
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, []problem{{where: where, what: field.Invalid(field.NewPath("items"), jsonValue(raw), "must be a list").Error()}}
	}
	listAPIVersion, _ := stringValue(list, "apiVersion")
	itemKind := strings.TrimSuffix(listKind, "List")
	var (
		manifests []manifest
		problems  []problem
	)
	for i, item := range items {
		itemOrigin := o
		itemOrigin.item = i + 1
		obj, p := decodeObject(itemOrigin, item)
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		if itemKind != "" {
			item = fillTypeMeta(obj, listAPIVersion, itemKind, item)
		}
		if k, _ := stringValue(obj, "kind"); k == "List" {
			problems = append(problems, problem{where: itemOrigin.String(), what: "a List inside a List is not supported"})
			continue
		}
		m, ps := checkObject(itemOrigin, obj, item)
		if len(ps) > 0 {
			problems = append(problems, ps...)
			continue
		}
		manifests = append(manifests, m)
	}
	return manifests, problems
}

// fillTypeMeta sets apiVersion and kind of an item of a typed list that
// has neither, and returns the item's JSON.
func fillTypeMeta(obj map[string]json.RawMessage, apiVersion, kind string, raw json.RawMessage) json.RawMessage {
	_, hasAPIVersion := obj["apiVersion"]
	_, hasKind := obj["kind"]
	if hasAPIVersion || hasKind || apiVersion == "" {
		return raw
	}
	obj["apiVersion"], _ = json.Marshal(apiVersion)
	obj["kind"], _ = json.Marshal(kind)
	filled, err := json.Marshal(obj)
	if err != nil { // cannot happen: every value is valid JSON already
		return raw
	}
	return filled
}

// checkObject checks what the hub needs to identify an object: apiVersion,
// kind and metadata.name. Everything else is the hub's to judge.
func checkObject(o origin, obj map[string]json.RawMessage, raw json.RawMessage) (manifest, []problem) {
	m := manifest{origin: o, raw: raw}
	var errs field.ErrorList
	var err *field.Error
	m.apiVersion, err = requiredString(obj, nil, "apiVersion")
	errs = appendError(errs, err)
	m.kind, err = requiredString(obj, nil, "kind")
	errs = appendError(errs, err)
	m.name, err = metadataName(obj)
	errs = appendError(errs, err)
	problems := make([]problem, 0, len(errs))
	for _, e := range errs {
		problems = append(problems, problem{where: m.where(), what: e.Error()})
	}
	return m, problems
}

func appendError(errs field.ErrorList, err *field.Error) field.ErrorList {
	if err == nil {
		return errs
	}
	return append(errs, err)
}

// metadataName is metadata.name, which must be a non-empty string.
func metadataName(obj map[string]json.RawMessage) (string, *field.Error) {
	path := field.NewPath("metadata")
	raw, ok := obj["metadata"]
	if !ok || isNull(raw) {
		return "", field.Required(path.Child("name"), "")
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(raw, &meta); err != nil {
		return "", field.Invalid(path, jsonValue(raw), "must be an object")
	}
	return requiredString(meta, path, "name")
}

// requiredString is obj[key], which must be a non-empty string; parent is
// the path of obj, nil at the top.
func requiredString(obj map[string]json.RawMessage, parent *field.Path, key string) (string, *field.Error) {
	path := field.NewPath(key)
	if parent != nil {
		path = parent.Child(key)
	}
	raw, ok := obj[key]
	if !ok || isNull(raw) {
		return "", field.Required(path, "")
	}
	s, ok := stringValue(obj, key)
	if !ok {
		return "", field.Invalid(path, jsonValue(raw), "must be a string")
	}
	if s == "" {
		return "", field.Required(path, "")
	}
	return s, nil
}

// decodeObject decodes a document or List item that must be a JSON object.
func decodeObject(o origin, raw json.RawMessage) (map[string]json.RawMessage, *problem) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, &problem{where: o.String(), what: fmt.Sprintf(
			"must be an object with apiVersion, kind and metadata, not %s", jsonTypeName(raw))}
	}
	return obj, nil
}

// stringValue is obj[key] if it is a JSON string.
func stringValue(obj map[string]json.RawMessage, key string) (string, bool) {
	var s string
	if err := json.Unmarshal(obj[key], &s); err != nil {
		return "", false
	}
	return s, true
}

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

// jsonValue decodes raw for a message, so a number prints as 3 and a
// string as "x".
func jsonValue(raw json.RawMessage) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

// jsonTypeName names the type of a JSON value in words.
func jsonTypeName(raw json.RawMessage) string {
	switch v := jsonValue(raw).(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// unstructured decodes the manifest into an object.
func (m manifest) unstructured() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(m.raw); err != nil {
		return nil, fmt.Errorf("decoding the object: %w", err)
	}
	return u, nil
}
