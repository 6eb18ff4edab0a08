// Package e2e runs the real flotilla-hub, flotilla-agent and flotilla
// binaries against real member clusters, over QUIC on loopback.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
)

// binDir holds the binaries built for this test run.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "flotilla-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Static, as `make images` builds them: the real-node tests pack these
	// very binaries into their images, so they cost no second build (that
	// would compile the embedded kube-apiserver again).
	build := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "../../cmd/flotilla-hub", "../../cmd/flotilla-agent", "../../cmd/flotilla", "../../test/cmd/hubwatch")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build binaries:", err)
		return 1
	}
	binDir = dir
	return m.Run()
}

// Short timings for tests; the defaults are in DESIGN §3.
const (
	testGrace           = 4 * time.Second
	testLeaseDuration   = 2 * time.Second
	testEvictionTimeout = 3 * time.Second
)

// hub is a running flotilla-hub process.
type hub struct {
	*process.Process
	dataDir, quicAddr, httpAddr string
	apiAddr                     string
	readyAt                     time.Time // when it first answered /healthz
}

func freePort(t *testing.T, find func() (int, error)) int {
	t.Helper()
	port, err := find()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startHub starts a hub with test timings on free loopback ports.
func startHub(t *testing.T, extraFlags ...string) *hub {
	t.Helper()
	dir := t.TempDir()
	h := loopbackHub(t, dir)
	runHub(t, h, dir, nil, extraFlags...)
	return h
}

// loopbackHub is a hub with its data in dir and its addresses on free
// loopback ports, not started yet.
func loopbackHub(t *testing.T, dir string) *hub {
	t.Helper()
	return &hub{
		dataDir:  filepath.Join(dir, "data"),
		quicAddr: "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.UDP)),
		httpAddr: "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP)),
		apiAddr:  "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP)),
	}
}

// runHub starts flotilla-hub with h's addresses and the test timings, plus
// extraFlags, logging into dir, and stops it when the test ends. wrap, if
// not nil, turns the command into the one to run (e.g. inside a network
// namespace).
func runHub(t *testing.T, h *hub, dir string, wrap func(bin string, args ...string) (string, []string), extraFlags ...string) {
	t.Helper()
	args := append([]string{
		"--data-dir=" + h.dataDir, "--quic-addr=" + h.quicAddr, "--http-addr=" + h.httpAddr, "--api-addr=" + h.apiAddr, "--hub-id=e2e-hub",
		"--cluster-monitor-grace-period=" + testGrace.String(),
		"--cluster-startup-grace-period=10s",
		"--failover-eviction-timeout=" + testEvictionTimeout.String(),
		"--cluster-failure-threshold=2s", "--cluster-success-threshold=1s",
		"--store-flush-interval=200ms", "--lease-flush-interval=1s",
	}, extraFlags...)
	bin := filepath.Join(binDir, "flotilla-hub")
	if wrap != nil {
		bin, args = wrap(bin, args...)
	}
	h.Process = &process.Process{Name: "flotilla-hub", Binary: bin, Args: args,
		LogPath: filepath.Join(dir, "hub.log"), Env: []string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"}}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stop hub: %v", err)
		}
		if t.Failed() {
			t.Logf("hub log:\n%s", process.TailFile(h.LogPath, 60))
		}
	})
	h.start(t)
}

// start starts (or restarts) the hub process and waits for its API.
func (h *hub) start(t *testing.T) {
	t.Helper()
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "hub API", func() (bool, string) {
		if h.HasExited() {
			t.Fatalf("hub exited: %v", h.ExitError())
		}
		resp, err := http.Get("http://" + h.httpAddr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	h.readyAt = time.Now()
}

// issueCert runs `flotilla-hub certs issue` for a cluster and returns the folder.
func (h *hub) issueCert(t *testing.T, cluster string) string {
	t.Helper()
	out := filepath.Join(filepath.Dir(h.dataDir), "certs-"+cluster)
	cmd := exec.Command(filepath.Join(binDir, "flotilla-hub"), "certs", "issue", "--data-dir", h.dataDir, "--cluster", cluster, "--out", out)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("certs issue %s: %v\n%s", cluster, err, output)
	}
	return out
}

// kubeconfig is the admin kubeconfig the hub writes into its data folder.
func (h *hub) kubeconfig() string { return filepath.Join(h.dataDir, "admin.kubeconfig") }

// restConfig is the admin client configuration of the hub's API.
func (h *hub) restConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", h.kubeconfig())
	if err != nil {
		t.Fatalf("hub kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// getJSON decodes GET path into v and returns the status code: paths under
// /api and /apis from the hub's Kubernetes API (as admin), others (/metrics,
// /debug/stats) from its HTTP address.
func (h *hub) getJSON(t *testing.T, path string, v any) int {
	t.Helper()
	if strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/apis/") {
		return h.getAPI(t, path, v)
	}
	resp, err := http.Get("http://" + h.httpAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}
	return resp.StatusCode
}

func (h *hub) getAPI(t *testing.T, path string, v any) int {
	t.Helper()
	client, err := kubernetes.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	body, err := client.CoreV1().RESTClient().Get().RequestURI(path).Do(t.Context()).StatusCode(&code).Raw()
	if code == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	} else if code == 0 {
		t.Fatalf("GET %s: %v", path, err)
	}
	return code
}

// metrics reads the hub's Prometheus metrics.
func (h *hub) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + h.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", resp.Status, err)
	}
	return string(body)
}

func (h *hub) cluster(t *testing.T, name string) *v1alpha1.Cluster {
	t.Helper()
	var c v1alpha1.Cluster
	if code := h.getJSON(t, "/apis/flotilla.io/v1alpha1/clusters/"+name, &c); code != http.StatusOK {
		return nil
	}
	return &c
}

func (h *hub) lease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	var l coordinationv1.Lease
	if code := h.getJSON(t, "/apis/coordination.k8s.io/v1/namespaces/flotilla-cluster-lease/leases/"+name, &l); code != http.StatusOK {
		return nil
	}
	return &l
}

// agent is a running flotilla-agent process.
type agent struct{ *process.Process }

// startAgent runs an agent for a member cluster against the hub, with
// extra flags.
func startAgent(t *testing.T, h *hub, c *membercluster.Cluster, extra ...string) *agent {
	t.Helper()
	certDir := h.issueCert(t, c.Name)
	return runAgent(t, c.Name, filepath.Join(filepath.Dir(certDir), "agent-"+c.Name+".log"), append([]string{
		"--hub=" + h.quicAddr, "--cluster-name=" + c.Name, "--kubeconfig=" + c.Kubeconfig,
		"--cert-dir=" + certDir, "--lease-duration=" + testLeaseDuration.String(), "--status-interval=500ms"}, extra...)...)
}

// runAgent runs flotilla-agent for cluster with args until the test ends,
// logging to logPath (shown when the test fails). Without an --http-addr in
// args the agent serves no endpoints: the default :8080 belongs to the
// tests that ask for it.
func runAgent(t *testing.T, cluster, logPath string, args ...string) *agent {
	t.Helper()
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--http-addr") }) {
		args = append(args, "--http-addr=")
	}
	a := &agent{&process.Process{
		Name:    "flotilla-agent/" + cluster,
		Binary:  filepath.Join(binDir, "flotilla-agent"),
		Args:    args,
		LogPath: logPath,
		Env:     []string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"},
	}}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Errorf("stop agent: %v", err)
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", cluster, process.TailFile(a.LogPath, 30))
		}
	})
	return a
}

// waitFor polls cond every 50 ms until it holds or the timeout passes. The
// processes under test run on their own clocks, so observing them means
// polling; no test step waits for a fixed time.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
		case <-ticker.C:
		}
	}
}

func readyOf(c *v1alpha1.Cluster) metav1.ConditionStatus {
	if c == nil {
		return "<absent>"
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionReady); cond != nil {
		return cond.Status
	}
	return "<none>"
}

func hasTaint(c *v1alpha1.Cluster, key string, effect corev1.TaintEffect) bool {
	if c == nil {
		return false
	}
	for _, t := range c.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

func describe(c *v1alpha1.Cluster) string {
	if c == nil {
		return "<absent>"
	}
	var taints []string
	for _, t := range c.Spec.Taints {
		taints = append(taints, t.Key+":"+string(t.Effect))
	}
	return fmt.Sprintf("Ready=%s taints=[%s]", readyOf(c), strings.Join(taints, ","))
}

// waitReady waits until the cluster is Ready with no health taints.
func waitReady(t *testing.T, h *hub, name string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, name+" Ready", func() (bool, string) {
		c := h.cluster(t, name)
		return readyOf(c) == metav1.ConditionTrue && len(c.Spec.Taints) == 0, describe(c)
	})
}

// ensureNamespaces creates on the hub the namespaces the YAML documents
// use: the hub's API, like any Kubernetes API, stores namespaced objects
// only in namespaces that exist.
func ensureNamespaces(t *testing.T, h *hub, docs string) {
	t.Helper()
	client, err := kubernetes.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		var doc struct {
			Metadata struct{ Namespace string } `json:"metadata"`
		}
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			return // a malformed document is the test's subject: flotilla apply reports it
		}
		ns := doc.Metadata.Namespace
		if ns == "" {
			continue
		}
		_, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
}

// eventCount is how often the hub recorded reason (any, if empty) about an object: repeats
// of one event are one object with a count.
func eventCount(t *testing.T, h *hub, kind, namespace, name, reason string) int32 {
	t.Helper()
	var events corev1.EventList
	selector := "involvedObject.kind%3D" + kind + ",involvedObject.name%3D" + name
	if reason != "" {
		selector += ",reason%3D" + reason
	}
	h.getJSON(t, "/api/v1/namespaces/"+namespace+"/events?fieldSelector="+selector, &events)
	var n int32
	for _, ev := range events.Items {
		switch {
		case ev.Series != nil:
			n += ev.Series.Count
		case ev.Count > 0:
			n += ev.Count
		default:
			n++
		}
	}
	return n
}
