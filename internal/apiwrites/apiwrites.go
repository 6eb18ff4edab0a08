// Package apiwrites classifies a Kubernetes client's requests as API
// writes — resource, subresource and verb, from the method, the path and
// the content type — and counts them, so that the hub's metrics and its
// benchmarks can say what its controllers write per binding and per
// eviction. It looks at requests on a client's transport: nothing here
// talks to an API server.
package apiwrites

import (
	"cmp"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Other is the resource (and subresource) of a write whose path is not a
// resource path the API server would serve, or whose names are not
// resource names: the label set stays bounded whatever a client sends.
const Other = "other"

// The verbs of writes. Apply is a PATCH with the server-side apply content
// type; DeleteCollection a DELETE of a collection.
const (
	Create           = "create"
	Update           = "update"
	Patch            = "patch"
	Apply            = "apply"
	Delete           = "delete"
	DeleteCollection = "deletecollection"
)

// Write is one kind of API write: its resource as in the URL
// ("resourcebindings"), its subresource ("status", or "") and its verb.
type Write struct {
	Resource, Subresource, Verb string
}

// Compare orders writes by resource, subresource and verb (for
// slices.SortFunc).
func Compare(a, b Write) int {
	return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Subresource, b.Subresource), cmp.Compare(a.Verb, b.Verb))
}

// String is the write as "verb resource[/subresource]".
func (w Write) String() string {
	if w.Subresource == "" {
		return w.Verb + " " + w.Resource
	}
	return w.Verb + " " + w.Resource + "/" + w.Subresource
}

// resolver is the API server's own reading of a request path, so that
// the counts name resources as the API server's request metrics do.
var resolver = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// applyPatchType is server-side apply's content type (YAML or CBOR).
const applyPatchType = "application/apply-patch"

// Classify says which write req is; ok is false for requests that write
// nothing (GET, LIST, WATCH, HEAD, ...).
func Classify(req *http.Request) (w Write, ok bool) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return Write{}, false
	}
	info, err := resolver.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest || !isName(info.Resource) {
		return Write{Resource: Other, Verb: verbOf(req, "")}, true
	}
	w = Write{Resource: info.Resource, Subresource: info.Subresource, Verb: verbOf(req, info.Verb)}
	if w.Subresource != "" && !isName(w.Subresource) {
		w.Subresource = Other
	}
	return w, true
}

// verbOf is the write's verb: the resolver's, apply told apart from
// patch, and the HTTP method's where the resolver had none.
func verbOf(req *http.Request, resolved string) string {
	switch {
	case req.Method == http.MethodPatch && strings.HasPrefix(req.Header.Get("Content-Type"), applyPatchType):
		return Apply
	case resolved == Create || resolved == Update || resolved == Patch || resolved == Delete || resolved == DeleteCollection:
		return resolved
	}
	switch req.Method {
	case http.MethodPost:
		return Create
	case http.MethodPut:
		return Update
	case http.MethodPatch:
		return Patch
	default:
		return Delete
	}
}

// isName reports whether s could be a resource's name in a URL: lower
// case letters, digits and '-' or '.', at most 63 characters.
func isName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// Result is what became of a write, from its response's status code.
type Result int

const (
	// Failed: no response, or an error other than a conflict.
	Failed Result = iota
	// Succeeded: a 2xx answer.
	Succeeded
	// Conflicted: 409, a stale resourceVersion or a create of an object
	// that exists.
	Conflicted
)

// ResultOf classifies a response's status code (0: no response).
func ResultOf(code int) Result {
	switch {
	case code >= 200 && code < 300:
		return Succeeded
	case code == http.StatusConflict:
		return Conflicted
	default:
		return Failed
	}
}

// Observer is told of every write a wrapped transport carries, with its
// response's status code (0 when there was none).
type Observer func(w Write, code int)

// Transport wraps next so that observe sees each write.
func Transport(next http.RoundTripper, observe Observer) http.RoundTripper {
	return transport{next: next, observe: observe}
}

type transport struct {
	next    http.RoundTripper
	observe Observer
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	w, isWrite := Classify(req) // before: the request is the caller's until it returns
	resp, err := t.next.RoundTrip(req)
	if isWrite {
		code := 0
		if err == nil {
			code = resp.StatusCode
		}
		t.observe(w, code)
	}
	return resp, err
}
