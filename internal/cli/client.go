package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxResponseBytes bounds what flotilla reads of one response.
const maxResponseBytes = 64 << 20

// client sends requests to the hub's HTTP API.
type client struct {
	server  string // as the operator gave it, for messages
	base    string // server without a trailing slash
	token   string
	timeout time.Duration
	http    *http.Client
}

// client returns a client for the invocation's --server and --timeout.
func (inv *invocation) client() *client {
	hc := inv.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &client{
		server:  inv.server,
		base:    strings.TrimSuffix(inv.server, "/"),
		token:   inv.Getenv("FLOTILLA_TOKEN"),
		timeout: inv.timeout,
		http:    hc,
	}
}

// do sends one request and returns the body of a 2xx response. Any other
// response becomes an *apierrors.StatusError, so callers can use
// apierrors.IsNotFound and IsConflict; a request that never got an answer
// becomes an error that names the server.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the answer to %s %s from %s: %w", method, path, c.server, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, responseError(method, path, resp, data)
	}
	return data, nil
}

func (c *client) newRequest(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Request, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// transportError explains a request that got no HTTP answer at all.
func (c *client) transportError(ctx context.Context, err error) error {
	cause := err
	var uerr *url.Error
	if errors.As(err, &uerr) {
		cause = uerr.Err // drop the repeated method and URL
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("the hub at %s did not answer within %s (raise --timeout, or check --server): %w",
			c.server, c.timeout, err)
	case ctx.Err() != nil:
		return fmt.Errorf("request to the hub at %s abandoned: %w", c.server, ctx.Err())
	}
	return &connError{server: c.server, cause: cause, err: err}
}

// connError is a hub that could not be reached.
type connError struct {
	server string
	cause  error // err without the url.Error wrapping, for the message
	err    error
}

func (e *connError) Error() string {
	return fmt.Sprintf("cannot reach the hub at %s: %v (is it running? point --server or $FLOTILLA_SERVER at it)",
		e.server, e.cause)
}

func (e *connError) Unwrap() error { return e.err }

// responseError turns a non-2xx answer into a StatusError. The hub answers
// with a metav1.Status; anything else (a proxy's HTML page, say) is wrapped
// in one with the HTTP code, so IsNotFound and friends still work.
func responseError(method, path string, resp *http.Response, data []byte) error {
	var st metav1.Status
	if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
		if st.Code == 0 {
			st.Code = int32(resp.StatusCode)
		}
		if st.Message == "" {
			st.Message = fmt.Sprintf("%s %s: %s (reason %q)", method, path, resp.Status, st.Reason)
		}
		return apierrors.FromObject(&st)
	}
	snippet := strings.TrimSpace(string(data))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "..."
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    int32(resp.StatusCode),
		Message: fmt.Sprintf("%s %s: the server answered %s: %q", method, path, resp.Status, snippet),
	}}
}

// getJSON GETs path and decodes the answer into out. It returns the raw
// body too, for -o json and -o yaml.
func (c *client) getJSON(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	data, err := c.do(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("decoding the answer to GET %s from %s: %w", path, c.server, err)
	}
	return data, nil
}

// putJSON PUTs in to path and decodes the answer into out.
func (c *client) putJSON(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding PUT %s: %w", path, err)
	}
	data, err := c.do(ctx, http.MethodPut, path, nil, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding the answer to PUT %s from %s: %w", path, c.server, err)
	}
	return nil
}
