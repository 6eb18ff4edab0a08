package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
)

// etcdCluster is a real etcd cluster of several members on loopback, as an
// operator runs for hub replicas.
type etcdCluster struct {
	members   []*process.Process
	endpoints []string
}

// startEtcdCluster starts n etcd members that form one cluster.
func startEtcdCluster(t *testing.T, n int) *etcdCluster {
	t.Helper()
	binDir, err := membercluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &etcdCluster{}
	var initial, peers []string
	for i := range n {
		name := "hub-etcd-" + strconv.Itoa(i)
		peer := "http://127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP))
		e.endpoints = append(e.endpoints, "http://127.0.0.1:"+strconv.Itoa(freePort(t, freeport.TCP)))
		peers = append(peers, peer)
		initial = append(initial, name+"="+peer)
	}
	for i := range n {
		name := "hub-etcd-" + strconv.Itoa(i)
		p := &process.Process{Name: name, Binary: filepath.Join(binDir, "etcd"), LogPath: filepath.Join(dir, name+".log"), Args: []string{
			"--name=" + name, "--data-dir=" + filepath.Join(dir, name),
			"--listen-client-urls=" + e.endpoints[i], "--advertise-client-urls=" + e.endpoints[i],
			"--listen-peer-urls=" + peers[i], "--initial-advertise-peer-urls=" + peers[i],
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new",
			"--unsafe-no-fsync", "--log-level=warn",
		}}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.Stop()
			if t.Failed() {
				t.Logf("%s log:\n%s", name, process.TailFile(p.LogPath, 20))
			}
		})
		e.members = append(e.members, p)
	}
	waitFor(t, 30*time.Second, "etcd cluster healthy", func() (bool, string) {
		for _, ep := range e.endpoints {
			code, body := httpGet(ep + "/health")
			if code != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
				return false, ep + ": " + body
			}
		}
		return true, ""
	})
	return e
}

// httpGet returns the status and body of GET url (0 when it fails).
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body)
}

// Election timings short enough for a test: a standby takes over within
// about 3 s of the leader's last renewal.
var electionFlags = []string{"--leader-elect", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms"}

// startReplica starts a hub replica named id on the etcd cluster.
func startReplica(t *testing.T, e *etcdCluster, id string) *hub {
	t.Helper()
	dir := t.TempDir()
	h := &hub{
		dataDir:  filepath.Join(dir, "data"),
		quicAddr: "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.UDP)),
		httpAddr: "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP)),
		apiAddr:  "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP)),
	}
	runHub(t, h, dir, nil, append([]string{"--hub-id=" + id, "--etcd-endpoints=" + strings.Join(e.endpoints, ","), "--websocket-addr=off"}, electionFlags...)...)
	return h
}

// leads says whether the replica's /readyz passes: only the leader's does.
func (h *hub) leads() (bool, string) {
	code, body := httpGet("http://" + h.httpAddr + "/readyz?verbose")
	return code == http.StatusOK, body
}

// TestHubReplicas: two hub replicas on a three-member etcd cluster share
// one CA and elect one leader, which alone serves agents; the other stands
// by (its /readyz says so) and serves the API. SIGKILL of the leader: the
// standby takes over, the agent (given both addresses) reconnects to it
// within 10 s, and its cluster is never seen other than Ready.
func TestHubReplicas(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	first := startReplica(t, etcd, "e2e-hub-a")
	waitFor(t, 30*time.Second, "the first replica leads", first.leads)
	second := startReplica(t, etcd, "e2e-hub-b")
	if ok, body := second.leads(); ok || !strings.Contains(body, "standing by") {
		t.Errorf("the second replica's /readyz: ready %v, %q; want a standby", ok, body)
	}
	t.Run("the replicas share the CA and keys", func(t *testing.T) {
		for _, f := range []string{"pki/ca.crt", "pki/ca.key", "pki/stateless-reset.key", "apiserver/service-account.key"} {
			a, errA := os.ReadFile(filepath.Join(first.dataDir, f))
			b, errB := os.ReadFile(filepath.Join(second.dataDir, f))
			if errA != nil || errB != nil || !bytes.Equal(a, b) {
				t.Errorf("%s differs between the replicas (%v, %v)", f, errA, errB)
			}
		}
	})

	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	member := env.Clusters()[0]
	certDir := first.issueCert(t, member.Name)
	runAgent(t, member.Name, filepath.Join(filepath.Dir(certDir), "agent-"+member.Name+".log"),
		"--hub="+first.quicAddr+","+second.quicAddr, "--transport=quic", "--cluster-name="+member.Name, "--kubeconfig="+member.Kubeconfig,
		"--cert-dir="+certDir, "--lease-duration="+testLeaseDuration.String(), "--status-interval=500ms")
	// The standby's API serves the same objects: watch from there.
	waitReady(t, second, member.Name, 60*time.Second)
	if got := second.cluster(t, member.Name).Status.Agent.ConnectedTo; got != "e2e-hub-a" {
		t.Fatalf("connected to %q, want the leader e2e-hub-a", got)
	}

	monitor := monitorReady(t, second, member.Name)
	killed := time.Now()
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the standby leads", second.leads)
	took := time.Since(killed)
	waitFor(t, 20*time.Second, member.Name+" connected to e2e-hub-b", func() (bool, string) {
		c := second.cluster(t, member.Name)
		return c.Status.Agent.ConnectedTo == "e2e-hub-b", describe(c) + " connected to " + c.Status.Agent.ConnectedTo
	})
	moved := time.Since(killed)
	t.Logf("after the SIGKILL of the leader: the standby led after %v, the agent was connected to it after %v", took.Round(time.Millisecond), moved.Round(time.Millisecond))
	if moved > 10*time.Second {
		t.Errorf("the agent reconnected %v after the leader died, want within 10s", moved)
	}
	// Past a full grace period on the new leader: still Ready throughout.
	deadline := time.Now().Add(testGrace + 2*time.Second)
	waitFor(t, testGrace+5*time.Second, "a grace period on the new leader", func() (bool, string) {
		return time.Now().After(deadline), fmt.Sprint(time.Until(deadline))
	})
	monitor.stop(t)
	waitReady(t, second, member.Name, 5*time.Second)
}
