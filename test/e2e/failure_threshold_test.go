package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"encoding/pem"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// Thresholds of TestFailureThresholds: Karmada's 30 s scaled down, long
// against the agent's 500 ms status interval.
const (
	thresholdFailure = 6 * time.Second
	thresholdSuccess = 6 * time.Second
)

// TestFailureThresholds: Ready goes False only once the member's API
// server has been reported unhealthy for the failure threshold, and True
// again only once healthy for the success threshold. The agent reaches its
// API server through a proxy that fails its health probes on demand: one
// probe in three failing (a flaky server, where Karmada's cluster went
// Ready=False on one failed probe) changes nothing, either way.
func TestFailureThresholds(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	h := startHub(t, "--cluster-failure-threshold="+thresholdFailure.String(), "--cluster-success-threshold="+thresholdSuccess.String())
	member := env.Cluster("member-1")
	proxy := newFlakyProbeProxy(t, member)
	startAgent(t, h, member, "--kubeconfig="+proxy.kubeconfig)
	waitReady(t, h, "member-1", 30*time.Second)

	// stays checks that member-1's Ready stays want while the proxy fails
	// at least failures probes.
	stays := func(t *testing.T, want metav1.ConditionStatus, failures int64) {
		t.Helper()
		until := proxy.failed.Load() + failures
		waitFor(t, 60*time.Second, fmt.Sprintf("%d more failed probes", failures), func() (bool, string) {
			c := h.cluster(t, "member-1")
			if got := readyOf(c); got != want {
				t.Fatalf("member-1 went %s while one probe in three failed: %s", got, describe(c))
			}
			return proxy.failed.Load() >= until, fmt.Sprintf("%d of %d probes failed", proxy.failed.Load(), proxy.probes.Load())
		})
	}

	t.Run("one probe in three failing: still Ready", func(t *testing.T) {
		proxy.failEvery(3)
		// 6 failures over 18 probes: 9 s, longer than the threshold.
		stays(t, metav1.ConditionTrue, 6)
	})

	t.Run("every probe failing: False after the failure threshold", func(t *testing.T) {
		start := proxy.failEvery(1)
		var falseAt time.Time
		waitFor(t, thresholdFailure+30*time.Second, "member-1 Ready=False", func() (bool, string) {
			c := h.cluster(t, "member-1")
			falseAt = time.Now()
			return readyOf(c) == metav1.ConditionFalse && hasTaint(c, v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule), describe(c)
		})
		// The streak may have begun with the last probe before start.
		first := proxy.streakStart(start)
		t.Logf("failed probes since %s, Ready=False seen %v later", first.Format(time.RFC3339Nano), falseAt.Sub(first))
		if falseAt.Sub(first) < thresholdFailure {
			t.Errorf("Ready=False %v after the probes began to fail, before the failure threshold %v", falseAt.Sub(first), thresholdFailure)
		}
	})

	t.Run("one probe in three failing after an outage: still False", func(t *testing.T) {
		proxy.failEvery(3)
		stays(t, metav1.ConditionFalse, 6)
	})

	t.Run("every probe passing: True after the success threshold", func(t *testing.T) {
		start := proxy.failEvery(0)
		var trueAt time.Time
		waitFor(t, thresholdSuccess+30*time.Second, "member-1 Ready=True", func() (bool, string) {
			c := h.cluster(t, "member-1")
			trueAt = time.Now()
			return readyOf(c) == metav1.ConditionTrue, describe(c)
		})
		first := proxy.streakStart(start)
		t.Logf("passing probes since %s, Ready=True seen %v later", first.Format(time.RFC3339Nano), trueAt.Sub(first))
		if trueAt.Sub(first) < thresholdSuccess {
			t.Errorf("Ready=True %v after the probes began to pass, before the success threshold %v", trueAt.Sub(first), thresholdSuccess)
		}
	})
}

// flakyProbeProxy stands between an agent and its member API server: it
// passes every request on with the member's own credentials, and answers
// the API server's health probes (/readyz, /healthz) with 503 when told to.
type flakyProbeProxy struct {
	kubeconfig     string
	probes, failed atomic.Int64

	mu       sync.Mutex
	every    int64 // fail one probe in every; 0: none
	outcomes []probeOutcome
}

// probeOutcome is one health probe the proxy answered.
type probeOutcome struct {
	at     time.Time
	failed bool
}

func newFlakyProbeProxy(t *testing.T, member *membercluster.Cluster) *flakyProbeProxy {
	t.Helper()
	cfg, err := member.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProbeProxy{}
	forward := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/readyz" || r.URL.Path == "/healthz") && p.failThis() {
			http.Error(w, "[-]etcd failed: injected by the test's proxy", http.StatusServiceUnavailable)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: ca}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	p.kubeconfig = filepath.Join(t.TempDir(), "proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// failThis counts a probe and says whether it fails.
func (p *flakyProbeProxy) failThis() bool {
	n := p.probes.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	fail := p.every != 0 && n%p.every == 0
	if fail {
		p.failed.Add(1)
	}
	p.outcomes = append(p.outcomes, probeOutcome{at: time.Now(), failed: fail})
	return fail
}

// failEvery makes one probe in every fail from now (0: none) and returns
// when that began.
func (p *flakyProbeProxy) failEvery(every int64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.every = every
	return time.Now()
}

// streakStart is when the probes began to give the answer they give
// since t: the first probe of the run of equal outcomes that contains the
// first probe at or after t.
func (p *flakyProbeProxy) streakStart(t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := slices.IndexFunc(p.outcomes, func(o probeOutcome) bool { return !o.at.Before(t) })
	if at < 0 {
		return time.Time{}
	}
	for at > 0 && p.outcomes[at-1].failed == p.outcomes[at].failed {
		at--
	}
	return p.outcomes[at].at
}
