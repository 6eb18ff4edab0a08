package dashboard

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

//go:embed static
var staticFiles embed.FS

// user is an authenticated request's token and identity.
type user struct {
	token string
	id    Identity
}

// Handler serves the page at "/" and everything else under /dashboard/.
// Mount it for "GET /{$}" and "/dashboard/".
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(fmt.Sprintf("dashboard: embedded files: %v", err)) // a build error, not input
	}
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /dashboard/static/", http.StripPrefix("/dashboard/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		files.ServeHTTP(w, r)
	})))
	mux.HandleFunc("GET /dashboard/api/whoami", d.authed(d.whoami))
	mux.HandleFunc("GET /dashboard/api/stream", d.authed(d.stream))
	mux.HandleFunc("GET /dashboard/api/clusters/{name}/events", d.authed(d.events))
	mux.HandleFunc("GET /dashboard/api/clusters/{name}/lease", d.authed(d.leaseHistory))
	mux.HandleFunc("POST /dashboard/api/clusters/{name}/cordon", d.authed(d.cordon))
	mux.HandleFunc("POST /dashboard/api/clusters/{name}/taints", d.authed(d.taint))
	mux.HandleFunc("POST /dashboard/api/rebalance", d.authed(d.rebalance))
	mux.HandleFunc("POST /dashboard/api/purge", d.authed(d.purge))
	return mux
}

// securityHeaders keep the page from being framed or loading anything
// from elsewhere.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// authed authenticates the request's bearer token and checks that its user
// may at least list clusters. The token travels only in the Authorization
// header, never a cookie, so a page of another site cannot act with it.
func (d *Dashboard) authed(next func(http.ResponseWriter, *http.Request, *user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		token := bearerToken(r.Header.Get("Authorization"))
		src := requestSource(r.RemoteAddr)
		id, err := d.auth.authenticate(r.Context(), token, src)
		var limited *ErrSignInLimited
		switch {
		case errors.As(err, &limited):
			d.logLimited(limited)
			w.Header().Set("Retry-After", strconv.Itoa(int(limited.Wait/time.Second)+1))
			writeError(w, http.StatusTooManyRequests, err)
			return
		case errors.Is(err, ErrUnauthenticated):
			writeError(w, http.StatusUnauthorized, err)
			return
		case err != nil:
			writeError(w, http.StatusBadGateway, err)
			return
		}
		u := &user{token: token, id: id}
		ok, err := d.auth.allowed(r.Context(), token, id, Access{Verb: "list", Group: "flotilla.io", Resource: "clusters"})
		if err != nil {
			writeError(w, http.StatusBadGateway, err)
			return
		}
		if !ok {
			writeError(w, http.StatusForbidden, fmt.Errorf("%s may not list clusters.flotilla.io: bind it to ClusterRole flotilla-viewer (or operator, admin)", id.User))
			return
		}
		next(w, r, u)
	}
}

// logLimited says, at most once per 10 s, that sign-ins were refused for
// their source's failures.
func (d *Dashboard) logLimited(e *ErrSignInLimited) {
	if ok, held := d.limitLog.Allow(); ok {
		d.cfg.Logger.Warn("dashboard sign-in refused: too many failed sign-ins from this address (the hub made no TokenReview)",
			"source", describeSource(e.Source), "retryIn", e.Wait.Round(time.Second), "alsoRefusedSinceLastLine", held)
	}
}

// Capabilities are the actions the page offers a user.
type Capabilities struct {
	Cordon    bool `json:"cordon"` // and taint: update on clusters
	Rebalance bool `json:"rebalance"`
	Purge     bool `json:"purge"`
	Events    bool `json:"events"`
}

var capabilityChecks = []struct {
	access Access
	set    func(*Capabilities)
}{
	{Access{Verb: "update", Group: "flotilla.io", Resource: "clusters"}, func(c *Capabilities) { c.Cordon = true }},
	{Access{Verb: "create", Group: "apps.flotilla.io", Resource: "workloadrebalancers"}, func(c *Capabilities) { c.Rebalance = true }},
	{Access{Verb: "create", Group: "flotilla.io", Resource: "purgerequests"}, func(c *Capabilities) { c.Purge = true }},
	{Access{Verb: "list", Group: "", Resource: "events"}, func(c *Capabilities) { c.Events = true }},
}

func (d *Dashboard) capabilities(r *http.Request, u *user) (Capabilities, error) {
	var c Capabilities
	for _, check := range capabilityChecks {
		ok, err := d.auth.allowed(r.Context(), u.token, u.id, check.access)
		if err != nil {
			return c, err
		}
		if ok {
			check.set(&c)
		}
	}
	return c, nil
}

func (d *Dashboard) whoami(w http.ResponseWriter, r *http.Request, u *user) {
	caps, err := d.capabilities(r, u)
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Identity
		Can Capabilities `json:"can"`
	}{u.id, caps})
}

// leaseHistory serves a cluster's recent renewals from the registry.
func (d *Dashboard) leaseHistory(w http.ResponseWriter, r *http.Request, _ *user) {
	name := r.PathValue("name")
	var l Lease
	ok := false
	if d.cfg.Leases != nil {
		l, ok = d.cfg.Leases.Lease(name)
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("cluster %s: no lease known", name))
		return
	}
	h := LeaseHistory{Renewals: make([]int64, len(l.Renewals))}
	for i, t := range l.Renewals {
		h.Renewals[i] = millis(t)
	}
	writeJSON(w, http.StatusOK, h)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with {"error": ...}; an API status keeps its code.
func writeError(w http.ResponseWriter, code int, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		code = int(status.Status().Code)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
