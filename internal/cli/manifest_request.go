package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// manifestList is the body of apply and delete: a v1 List of the objects.
type manifestList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// actionList is the hub's answer to apply (ApplyResult) and delete
// (DeleteResult): what it did with each item, in request order.
type actionList struct {
	Items []itemAction `json:"items"`
}

type itemAction struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Action     string `json:"action"`
}

// sendManifests POSTs every manifest in one List to path (applyPath or
// deletePath) and returns what the hub did with each.
func (c *client) sendManifests(ctx context.Context, path string, query url.Values, manifests []manifest) ([]itemAction, error) {
	list := manifestList{APIVersion: "v1", Kind: "List", Items: make([]json.RawMessage, len(manifests))}
	for i, m := range manifests {
		list.Items[i] = m.raw
	}
	body, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("encoding POST %s: %w", path, err)
	}
	data, err := c.do(ctx, http.MethodPost, path, query, body)
	if err != nil {
		return nil, err
	}
	var out actionList
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding the answer to POST %s from %s: %w", path, c.server, err)
	}
	return out.Items, nil
}

// writeActions prints one line per item, as kubectl does:
// "deployment.apps/nginx created", followed by suffix.
func writeActions(w io.Writer, actions []itemAction, suffix string) error {
	var b strings.Builder
	for _, a := range actions {
		fmt.Fprintf(&b, "%s/%s %s%s\n", kindGroup(a.APIVersion, a.Kind), a.Name, a.Action, suffix)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// kindGroup is the lower-case kind and, for a kind with an API group, the
// group: "deployment.apps", "configmap".
func kindGroup(apiVersion, kind string) string {
	s := strings.ToLower(kind)
	if group, _, ok := strings.Cut(apiVersion, "/"); ok && group != "" {
		s += "." + group
	}
	return s
}

// causeItem matches the field of a cause about one item of the request:
// "items[2].spec.replicas" or "items[2]".
var causeItem = regexp.MustCompile(`^items\[(\d+)\](?:\.(.*))?$`)

// explainRejection turns the hub's 422 answer into one line per cause,
// each pointing at the file and document of the item it is about. Any
// other error is returned as it is.
func explainRejection(err error, manifests []manifest, nothingDone string) error {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return err
	}
	st := status.Status()
	if st.Details == nil || len(st.Details.Causes) == 0 {
		return fmt.Errorf("the hub rejected the objects; %s: %w", nothingDone, err)
	}
	problems := make([]problem, 0, len(st.Details.Causes))
	for _, c := range st.Details.Causes {
		problems = append(problems, causeProblem(c, manifests))
	}
	return &problemsError{
		summary:  fmt.Sprintf("the hub found %s; %s", countNoun(len(problems), "problem"), nothingDone),
		problems: problems,
	}
}

// causeProblem maps one cause back to the manifest it is about; a cause
// about no item (or an item the request did not have) is shown as sent.
func causeProblem(c metav1.StatusCause, manifests []manifest) problem {
	m := causeItem.FindStringSubmatch(c.Field)
	if m == nil {
		return problem{what: fieldMessage(c.Field, c.Message)}
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i >= len(manifests) {
		return problem{what: fieldMessage(c.Field, c.Message)}
	}
	// Some servers repeat the whole field path in the message.
	msg := strings.TrimPrefix(c.Message, c.Field+": ")
	return problem{where: manifests[i].where(), what: fieldMessage(m[2], msg)}
}

// fieldMessage is "field: message", or the message alone without a field.
func fieldMessage(field, msg string) string {
	if field == "" {
		return msg
	}
	return field + ": " + strings.TrimPrefix(msg, field+": ")
}
