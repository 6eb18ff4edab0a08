package controllertest

import (
	"net/http"
	"strings"
	"sync"
)

// RoundTripperFunc is a function as an http.RoundTripper.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// ConflictCounter counts the API server's 409 answers to one client, by
// "METHOD spec" or "METHOD status" (a write to the status subresource).
type ConflictCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Wrap counts the conflicts of the requests through rt: a
// rest.Config.WrapTransport.
func (c *ConflictCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusConflict {
			part := "spec"
			if strings.HasSuffix(req.URL.Path, "/status") {
				part = "status"
			}
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[req.Method+" "+part]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

// Get is the count of what, e.g. "PUT status".
func (c *ConflictCounter) Get(what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[what]
}
