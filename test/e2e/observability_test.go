package e2e

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flotilla-io/flotilla/internal/promcheck"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestHubObservability runs a real hub with one agent and checks what an
// operator watches it with: /livez, /readyz?verbose with each check,
// profiles only on the profiling address, /metrics clean under promtool's
// linter and moving (the lease age grows while the agent is down, the
// detection delay is observed once the cluster is Unknown), and --version
// of the three binaries.
func TestHubObservability(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	profilingAddr := "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP))
	h := startHub(t, "--enable-profiling", "--profiling-addr="+profilingAddr)
	agent := startAgent(t, h, env.Cluster("member-1"))
	waitReady(t, h, "member-1", 30*time.Second)

	t.Run("livez and readyz", func(t *testing.T) {
		if code, body := getBody(t, "http://"+h.httpAddr+"/livez"); code != http.StatusOK || body != "ok" {
			t.Errorf("/livez = %d %q", code, body)
		}
		// The HTTP endpoint serves before the informers have listed.
		want := "[+]etcd ok\n[+]kube-apiserver ok\n[+]informers-synced ok\n[+]quic-listener ok\nreadyz check passed\n"
		waitFor(t, 30*time.Second, "/readyz?verbose to pass", func() (bool, string) {
			code, body := getBody(t, "http://"+h.httpAddr+"/readyz?verbose")
			return code == http.StatusOK && body == want, strconv.Itoa(code) + " " + body
		})
		if code, body := getBody(t, "http://"+h.httpAddr+"/readyz"); code != http.StatusOK || body != "ok" {
			t.Errorf("/readyz = %d %q", code, body)
		}
	})

	t.Run("profiles only on the profiling address", func(t *testing.T) {
		if code, _ := getBody(t, "http://"+h.httpAddr+"/debug/pprof/"); code != http.StatusNotFound {
			t.Errorf("--http-addr /debug/pprof/ = %d, want 404", code)
		}
		code, body := getBody(t, "http://"+profilingAddr+"/debug/pprof/goroutine?debug=1")
		if code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
			t.Errorf("--profiling-addr goroutine profile = %d %.80q", code, body)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		m := scrapeHub(t, h)
		for _, c := range []struct {
			name   string
			labels map[string]string
		}{
			{"flotilla_build_info", map[string]string{"kubernetes": "v1.37.2", "goversion": runtime.Version()}},
			{"flotilla_cluster_lease_age_seconds", map[string]string{"cluster": "member-1"}},
			{"flotilla_cluster_ready", map[string]string{"cluster": "member-1", "status": "True"}},
			{"flotilla_connected_agents", nil},
			{"flotilla_lease_renewals_total", nil},
			{"workqueue_depth", map[string]string{"name": "failover"}},
			{"workqueue_adds_total", map[string]string{"name": "scheduling"}},
			{"rest_client_requests_total", map[string]string{"method": "GET", "code": "200"}},
			{"go_goroutines", nil},
			{"process_resident_memory_bytes", nil},
		} {
			if v := promcheck.Value(m, c.name, c.labels); math.IsNaN(v) {
				t.Errorf("no series %s%v", c.name, c.labels)
			}
		}
		if v := promcheck.Value(m, "flotilla_cluster_ready", map[string]string{"cluster": "member-1", "status": "True"}); v != 1 {
			t.Errorf("flotilla_cluster_ready{member-1,True} = %v, want 1", v)
		}
		if age := promcheck.Value(m, "flotilla_cluster_lease_age_seconds", map[string]string{"cluster": "member-1"}); age > testGrace.Seconds() {
			t.Errorf("lease age of a renewing agent = %v s", age)
		}
	})

	t.Run("agent killed: lease age grows, detection delay observed", func(t *testing.T) {
		// The lease must expire by the grace itself, not by the hub's start-up grace.
		restartGraceEnds := h.readyAt.Add(testGrace + testLeaseDuration)
		waitFor(t, time.Until(restartGraceEnds)+5*time.Second, "the hub's start-up grace to end", func() (bool, string) {
			return time.Now().After(restartGraceEnds), "start-up grace"
		})
		if err := agent.Kill(); err != nil {
			t.Fatal(err)
		}
		member := map[string]string{"cluster": "member-1"}
		var m map[string]*dto.MetricFamily
		waitFor(t, testGrace+15*time.Second, "member-1 Unknown in the metrics", func() (bool, string) {
			m = scrapeHub(t, h)
			v := promcheck.Value(m, "flotilla_cluster_ready", map[string]string{"cluster": "member-1", "status": "Unknown"})
			return v == 1, "ready{Unknown} " + strconv.FormatFloat(v, 'g', -1, 64)
		})
		age := promcheck.Value(m, "flotilla_cluster_lease_age_seconds", member)
		if age < testGrace.Seconds() {
			t.Errorf("lease age at Unknown = %v s, want at least the grace period %v", age, testGrace)
		}
		if n := promcheck.Value(m, "flotilla_cluster_detection_delay_seconds", nil); n != 1 {
			t.Errorf("detection delays observed = %v, want 1", n)
		}
		delay := m["flotilla_cluster_detection_delay_seconds"].GetMetric()[0].GetHistogram().GetSampleSum()
		t.Logf("lease age at Unknown %.3f s, detection delay %.3f s", age, delay)
		if delay > detectionSlack.Seconds() {
			t.Errorf("detection delay %v s, more than %v", delay, detectionSlack)
		}
		if v := promcheck.Value(m, "flotilla_cluster_taint", map[string]string{"cluster": "member-1", "key": "cluster.flotilla.io/unreachable", "effect": "NoSchedule"}); v != 1 {
			t.Errorf("unreachable:NoSchedule taint series = %v, want 1", v)
		}
		waitFor(t, 10*time.Second, "the lease age to grow", func() (bool, string) {
			later := promcheck.Value(scrapeHub(t, h), "flotilla_cluster_lease_age_seconds", member)
			return later >= age+1, strconv.FormatFloat(later, 'f', 3, 64)
		})
	})

	t.Run("metrics the chart's rules and dashboard use", func(t *testing.T) {
		checkMonitoringMetrics(t, scrapeHub(t, h))
	})

	t.Run("--version", func(t *testing.T) {
		for _, name := range []string{"flotilla-hub", "flotilla-agent", "flotilla"} {
			out, err := exec.Command(binDir+"/"+name, "--version").Output()
			if err != nil {
				t.Fatalf("%s --version: %v", name, err)
			}
			for _, want := range []string{"flotilla ", "kubernetes v1.37.2", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s --version = %q, want it to say %q", name, out, want)
				}
			}
		}
	})
}

func getBody(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, string(body)
}

// scrapeHub reads the hub's /metrics, failing the test on anything
// `promtool check metrics` or the naming conventions reject.
func scrapeHub(t *testing.T, h *hub) map[string]*dto.MetricFamily {
	t.Helper()
	body := []byte(h.metrics(t))
	// Karmada named a gauge like a counter; the hub keeps Karmada's name
	// so that Karmada's dashboards work, and the conventions are Flotilla's.
	lint := promcheck.Without(body, "eviction_kind_total")
	problems, err := promcheck.Problems(lint)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("/metrics breaks conventions:\n%s", strings.Join(problems, "\n"))
	}
	// And the real promtool, built from its module by make testbin.
	promtool := exec.Command(testbinTool(t, "promtool"), "check", "metrics")
	promtool.Stdin = bytes.NewReader(lint)
	if out, err := promtool.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	families, err := promcheck.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}
