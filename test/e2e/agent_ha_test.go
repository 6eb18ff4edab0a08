package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// Leader election timings of the HA test: a standby may take over 4 s
// after the leader's last renewal. The hub's grace period (20 s) is far
// above that plus a reconnect.
const (
	haElectionLease  = 4 * time.Second
	haElectionRenew  = 3 * time.Second
	haElectionRetry  = time.Second
	haGrace          = 20 * time.Second
	haCredentials    = "flotilla-agent-credentials"
	nginxMember1YAML = `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx-member-1, namespace: web}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement: {clusterAffinity: {clusterNames: [member-1]}}
`
)

// haReplica is one flotilla-agent process of a leader-elected pair.
type haReplica struct {
	*agent
	name, httpAddr string
}

// metric reads one series (name and labels as exposed) from the replica's
// /metrics; -1 if absent or unreachable.
func (r *haReplica) metric(series string) float64 {
	if v, ok := scrapeSeries("http://"+r.httpAddr+"/metrics", series); ok {
		return v
	}
	return -1
}

// scrapeSeries reads one series (name and labels as exposed) from a
// /metrics URL, outside the test's goroutine if need be (no t); false if
// absent or unreachable.
func scrapeSeries(url, series string) (float64, bool) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(body)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// clusterWatch records every state of a Cluster the hub's API shows from
// its start until stop.
type clusterWatch struct {
	mu     sync.Mutex
	states []string // Ready status and taints, in order
	events int
	stop   func()
	done   chan struct{}
}

func watchCluster(t *testing.T, h *hub, name string) *clusterWatch {
	t.Helper()
	client, err := versioned.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w, err := client.FlotillaV1alpha1().Clusters().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		cancel()
		t.Fatalf("watch cluster %s: %v", name, err)
	}
	cw := &clusterWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(cw.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ctx.Err() != nil {
				return // finish stopped it
			}
			c, ok := ev.Object.(*v1alpha1.Cluster)
			if !ok || ev.Type == watch.Error {
				cw.record(fmt.Sprintf("watch event %s: %v", ev.Type, apierrors.FromObject(ev.Object)))
				continue
			}
			cw.record(describe(c))
		}
		if ctx.Err() == nil {
			cw.record("the watch ended before the test stopped it")
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-cw.done
	})
	return cw
}

func (w *clusterWatch) record(state string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	w.states = append(w.states, state)
}

// finish stops the watch and returns the states it saw that were not
// Ready without taints, and how many events it saw.
func (w *clusterWatch) finish() (bad []string, events int) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.states {
		if s != "Ready=True taints=[]" {
			bad = append(bad, s)
		}
	}
	return bad, w.events
}

// TestAgentHATakeover: two flotilla-agent processes with --leader-elect
// and --cert-secret on one member cluster, joined with a bootstrap token;
// the seed nginx runs there. SIGKILL the leader: the standby takes the hub
// session within the election lease, the hub never shows the cluster
// other than Ready, and nothing is applied again.
func TestAgentHATakeover(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	c := env.Cluster("member-1")
	client, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, "--cluster-monitor-grace-period="+haGrace.String())
	token := h.createToken(t, "--cluster", "member-1")
	pin := h.pin(t)
	dir := t.TempDir()
	replicas := map[string]*haReplica{}
	for _, name := range []string{"a", "b"} {
		r := &haReplica{name: name, httpAddr: "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP))}
		r.agent = runAgent(t, "member-1/"+name, filepath.Join(dir, "agent-"+name+".log"),
			"--hub="+h.quicAddr, "--cluster-name=member-1", "--kubeconfig="+c.Kubeconfig, "--cert-secret="+haCredentials,
			"--bootstrap-token="+token, "--hub-ca-hash="+pin, "--lease-duration="+testLeaseDuration.String(), "--status-interval=500ms",
			"--leader-elect", "--leader-elect-lease-duration="+haElectionLease.String(),
			"--leader-elect-renew-deadline="+haElectionRenew.String(), "--leader-elect-retry-period="+haElectionRetry.String(),
			"--http-addr="+r.httpAddr)
		replicas[name] = r
	}
	waitReady(t, h, "member-1", 60*time.Second)

	f := &fleet{t: t, hub: h, env: env, agents: map[string]*agent{}, clients: map[string]kubernetes.Interface{"member-1": client}, dir: dir}
	f.apply("seed.yaml", nginxYAML+"---\n"+nginxMember1YAML)
	f.waitDeploymentsOf("web", "nginx", map[string]int32{"member-1": 3}, "nginx:1.27")

	var leader, standby *haReplica
	waitFor(t, 30*time.Second, "one leader, connected, and one ready standby", func() (bool, string) {
		var states []string
		leader, standby = nil, nil
		for _, r := range replicas {
			lead, conn := r.metric("flotilla_agent_leader"), r.metric("flotilla_agent_hub_connected")
			states = append(states, r.name+": leader="+strconv.FormatFloat(lead, 'f', -1, 64)+" connected="+strconv.FormatFloat(conn, 'f', -1, 64))
			switch {
			case lead == 1 && conn == 1:
				leader = r
			case lead == 0 && conn == 0 && ready(r.httpAddr):
				standby = r
			}
		}
		return leader != nil && standby != nil, strings.Join(states, "; ")
	})
	if got := leader.metric("flotilla_agent_work_applies_total"); got < 1 {
		t.Errorf("the leader's flotilla_agent_work_applies_total = %v, want the nginx apply", got)
	}
	before := f.deployment("member-1", "web", "nginx")

	w := watchCluster(t, h, "member-1")
	killedAt := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, haElectionLease+2*haElectionRetry+10*time.Second, "the standby to hold the hub session", func() (bool, string) {
		return standby.metric("flotilla_agent_hub_connected") == 1, "connected=" + strconv.FormatFloat(standby.metric("flotilla_agent_hub_connected"), 'f', -1, 64)
	})
	takeover := time.Since(killedAt)
	t.Logf("takeover: the standby's session was welcomed %v after SIGKILL of the leader (election lease %v, hub grace %v)",
		takeover.Round(time.Millisecond), haElectionLease, haGrace)
	if limit := haElectionLease + 2*haElectionRetry + 5*time.Second; takeover > limit {
		t.Errorf("takeover took %v, want within the election lease and a reconnect (%v)", takeover, limit)
	}
	// A few lease renewals of the new session, then what the hub showed.
	waitFor(t, 20*time.Second, "renewals of the new leader", func() (bool, string) {
		n := standby.metric("flotilla_agent_lease_renewal_rtt_seconds_count")
		return n >= 5, "renewals " + strconv.FormatFloat(n, 'f', -1, 64)
	})
	waitReady(t, h, "member-1", 10*time.Second)
	bad, events := w.finish()
	if len(bad) > 0 {
		t.Errorf("during the takeover the hub showed member-1 as %v", bad)
	}
	t.Logf("watched %d changes of the Cluster during the takeover", events)

	if got := standby.metric("flotilla_agent_work_applies_total"); got != 0 {
		t.Errorf("the new leader's flotilla_agent_work_applies_total = %v, want 0 (nothing applied again)", got)
	}
	after := f.deployment("member-1", "web", "nginx")
	type applied struct {
		ResourceVersion string
		Generation      int64
		ManagedFields   []metav1.ManagedFieldsEntry
	}
	if diff := cmp.Diff(applied{before.ResourceVersion, before.Generation, before.ManagedFields},
		applied{after.ResourceVersion, after.Generation, after.ManagedFields}); diff != "" {
		t.Errorf("the Deployment changed during the takeover (-before +after):\n%s", diff)
	}
	if s, err := client.CoreV1().Secrets("flotilla-system").Get(t.Context(), haCredentials, metav1.GetOptions{}); err != nil || len(s.Data["tls.crt"]) == 0 {
		t.Errorf("credential Secret: %v", err)
	}
}

// ready says whether an agent's /readyz answers 200.
func ready(httpAddr string) bool {
	resp, err := http.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
