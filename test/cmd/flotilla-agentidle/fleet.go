package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/hubclient"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
)

var quietQUIC = []string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"}

// hub is the running flotilla-hub and what an agent needs to reach it.
type hub struct {
	proc     *process.Process
	quicAddr string
	certDir  string
	dir      string
	api      *hubclient.Client
}

// startHub starts a hub, issues the cluster's agent certificate and waits
// for the hub's API.
func startHub(ctx context.Context, bin, dir, cluster string) (*hub, error) {
	var ports [3]int
	for i := range ports {
		var err error
		if i == 0 {
			ports[i], err = freeport.UDP()
		} else {
			ports[i], err = freeport.TCP()
		}
		if err != nil {
			return nil, err
		}
	}
	h := &hub{quicAddr: "127.0.0.1:" + strconv.Itoa(ports[0]), certDir: filepath.Join(dir, "certs"), dir: dir}
	httpAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	dataDir := filepath.Join(dir, "hub")
	h.proc = &process.Process{Name: "flotilla-hub", Binary: bin, LogPath: filepath.Join(dir, "hub.log"), Env: quietQUIC,
		Args: []string{"--data-dir=" + dataDir, "--quic-addr=" + h.quicAddr, "--http-addr=" + httpAddr,
			"--api-addr=127.0.0.1:" + strconv.Itoa(ports[2]), "--log-level=warn"}}
	if err := h.proc.Start(); err != nil {
		return nil, err
	}
	err := poll(ctx, time.Minute, "the hub's API", func() (bool, error) {
		api, err := hubclient.New(filepath.Join(dataDir, "admin.kubeconfig"), httpAddr)
		if err != nil {
			return false, nil // not written yet
		}
		var list struct{}
		if api.Get(ctx, "/apis/flotilla.io/v1alpha1/clusters", &list) != nil {
			return false, nil
		}
		h.api = api
		return true, nil
	})
	if err == nil {
		issue := exec.CommandContext(ctx, bin, "certs", "issue", "--data-dir", dataDir, "--cluster", cluster, "--out", h.certDir)
		if out, ierr := issue.CombinedOutput(); ierr != nil {
			err = fmt.Errorf("certs issue %s: %v\n%s", cluster, ierr, out)
		}
	}
	if err != nil {
		h.stop()
		return nil, err
	}
	return h, nil
}

func (h *hub) stop() { _ = h.proc.Stop() }

// startAgent starts one agent binary for cluster, with its metrics on a
// loopback port, and returns it with that address.
func (h *hub) startAgent(bin, label string, cluster *membercluster.Cluster) (*process.Process, string, error) {
	port, err := freeport.TCP()
	if err != nil {
		return nil, "", err
	}
	metrics := "127.0.0.1:" + strconv.Itoa(port)
	a := &process.Process{Name: "flotilla-agent " + label, Binary: bin, Env: quietQUIC,
		LogPath: filepath.Join(h.dir, "agent-"+strconv.Itoa(port)+".log"),
		Args: []string{"--hub=" + h.quicAddr, "--cluster-name=" + cluster.Name, "--kubeconfig=" + cluster.Kubeconfig,
			"--cert-dir=" + h.certDir, "--log-level=warn", "--http-addr=" + metrics}}
	return a, metrics, a.Start()
}

// waitCapacity waits until the hub shows the cluster with every node and
// pod, reported by the agent just started.
func (h *hub) waitCapacity(ctx context.Context, cluster string, nodes, pods int, since time.Time) error {
	want := resource.MustParse(strconv.Itoa(pods))
	return poll(ctx, 5*time.Minute, fmt.Sprintf("the hub to show %d nodes and %d pods", nodes, pods), func() (bool, error) {
		var c struct {
			Status struct {
				NodeSummary struct {
					TotalNum int `json:"totalNum"`
				} `json:"nodeSummary"`
				ResourceSummary struct {
					Allocated map[string]resource.Quantity `json:"allocated"`
				} `json:"resourceSummary"`
				Agent struct {
					ConnectedAt time.Time `json:"connectedAt"`
				} `json:"agent"`
			} `json:"status"`
		}
		if err := h.api.Get(ctx, "/apis/flotilla.io/v1alpha1/clusters/"+cluster, &c); err != nil {
			return false, nil // not registered yet
		}
		got := c.Status.ResourceSummary.Allocated["pods"]
		fresh := !c.Status.Agent.ConnectedAt.Before(since.Truncate(time.Second))
		return fresh && c.Status.NodeSummary.TotalNum == nodes && got.Cmp(want) == 0, nil
	})
}

// poll calls done every 200 ms until it is true, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}
