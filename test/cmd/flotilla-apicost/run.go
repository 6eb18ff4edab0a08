package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/process"
	"github.com/flotilla-io/flotilla/test/procstat"
)

// namespace holds the objects; the generic server does not check that it
// exists, kube-apiserver does.
const namespace = "apicost"

// row is one measured batch, for the table.
type row struct {
	server serverKind
	kind   string
	wire   string // the replies' encodings so far
	phase
}

func run(ctx context.Context, o runOptions) error {
	// Linking kube-apiserver makes client-go read its feature gates from
	// the process's (utilfeature) gates, not from KUBE_FEATURE_* variables.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{"ClientsAllowCBOR": true}); err != nil {
		return fmt.Errorf("client feature gate: %w", err)
	}
	dir, err := os.MkdirTemp("", "flotilla-apicost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	etcd, etcdURL, err := startEtcd(ctx, o.testbin, dir)
	if err != nil {
		return err
	}
	defer etcd.Stop()
	var rows []row
	for _, s := range o.servers {
		r, err := measureServer(ctx, o, s, dir, etcd.Pid(), etcdURL)
		rows = append(rows, r...)
		if err != nil {
			printRows(rows)
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	printRows(rows)
	return nil
}

func measureServer(ctx context.Context, o runOptions, kind serverKind, dir string, etcdPid int, etcdURL string) ([]row, error) {
	sdir := filepath.Join(dir, string(kind))
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	proc := &process.Process{Name: string(kind), Binary: self, LogPath: filepath.Join(sdir, "server.log"),
		Args: []string{"serve", "--server=" + string(kind), "--dir=" + sdir, "--etcd=" + etcdURL}}
	if err := proc.Start(); err != nil {
		return nil, err
	}
	defer proc.Kill()
	cfg, err := waitServer(ctx, proc, sdir)
	if err != nil {
		return nil, err
	}
	if kind == crdCBOR || kind == builtinCBOR {
		cfg.ContentType = runtime.ContentTypeCBOR
		cfg.AcceptContentTypes = runtime.ContentTypeCBOR
	}
	wire := &wireCounter{}
	cfg.Wrap(wire.wrap)
	flotilla, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if kind == crdJSON || kind == crdCBOR {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("namespace: %w", err)
		}
	}
	cpu := &cpuMeter{serverPid: proc.Pid(), etcdPid: etcdPid}
	if err := cpu.measureIdle(ctx, o.idle); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "%s: pid %d ready, idle CPU %.3f cores (etcd %.3f)\n", kind, proc.Pid(), cpu.idleServer, cpu.idleEtcd)
	var rows []row
	for round := range o.repeat {
		kinds := []kindOps{bindingOps(flotilla, namespace, round)}
		if kind == crdJSON || kind == crdCBOR {
			kinds = append(kinds, configMapOps(kube, namespace, round))
		}
		for _, k := range kinds {
			r, err := measureKind(ctx, o, cpu, k)
			for i := range r {
				r[i].server, r[i].wire = kind, wire.String()
				fmt.Fprintf(os.Stderr, "%s %s %s: %.2f ms per write\n", kind, r[i].kind, r[i].op, 1000*r[i].serverCPU/float64(r[i].writes))
			}
			rows = append(rows, r...)
			if err != nil {
				return rows, fmt.Errorf("%w (server log: %s)", err, process.TailFile(proc.LogPath, 20))
			}
		}
	}
	return rows, nil
}

// measureKind creates o.objects objects, updates each once and (if the
// kind has a status) updates each one's status once.
func measureKind(ctx context.Context, o runOptions, cpu *cpuMeter, k kindOps) ([]row, error) {
	ops := []struct {
		name string
		op   func(ctx context.Context, i int) (int, error)
	}{
		{"create", func(ctx context.Context, i int) (int, error) { return 0, k.create(ctx, i) }},
		{"update", func(ctx context.Context, i int) (int, error) { return k.update(ctx, i, 1) }},
	}
	if k.status != nil {
		ops = append(ops, struct {
			name string
			op   func(ctx context.Context, i int) (int, error)
		}{"status", func(ctx context.Context, i int) (int, error) { return k.status(ctx, i, 1) }})
	}
	var rows []row
	for _, op := range ops {
		p, err := runPhase(ctx, op.name, cpu, o.objects, o.clients, op.op)
		rows = append(rows, row{kind: k.name, phase: p})
		if err != nil {
			return rows, err
		}
	}
	if k.check != nil {
		if err := k.check(ctx, o.objects-1); err != nil {
			return rows, fmt.Errorf("%s: %w", k.name, err)
		}
	}
	return rows, nil
}

// waitServer waits for the server's ready file and then for /readyz.
func waitServer(ctx context.Context, proc *process.Process, dir string) (*rest.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-proc.Exited():
			return nil, fmt.Errorf("server exited: %v: %s", proc.ExitError(), process.TailFile(proc.LogPath, 30))
		case <-ctx.Done():
			return nil, fmt.Errorf("server not ready: %w: %s", ctx.Err(), process.TailFile(proc.LogPath, 30))
		case <-tick.C:
		}
		if _, err := os.Stat(filepath.Join(dir, readyFile)); err != nil {
			continue
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = -1, 0
		cfg.WarningHandler = rest.NoWarnings{}
		if ready(ctx, cfg) {
			return cfg, nil
		}
	}
}

func ready(ctx context.Context, cfg *rest.Config) bool {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// cpuMeter reads the server's and etcd's CPU time.
type cpuMeter struct {
	serverPid, etcdPid   int
	idleServer, idleEtcd float64 // cores
}

type cpuTimes struct{ server, etcd float64 }

func (m *cpuMeter) read() (cpuTimes, error) {
	s, err1 := procstat.CPUSeconds(m.serverPid)
	e, err2 := procstat.CPUSeconds(m.etcdPid)
	return cpuTimes{s, e}, errors.Join(err1, err2)
}

func (m *cpuMeter) measureIdle(ctx context.Context, d time.Duration) error {
	before, err := m.read()
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	after, err := m.read()
	if err != nil {
		return err
	}
	m.idleServer, m.idleEtcd = (after.server-before.server)/d.Seconds(), (after.etcd-before.etcd)/d.Seconds()
	return nil
}

func startEtcd(ctx context.Context, binDir, dir string) (*process.Process, string, error) {
	client, err1 := freeport.TCP()
	peer, err2 := freeport.TCP()
	if err := errors.Join(err1, err2); err != nil {
		return nil, "", err
	}
	url, peerURL := fmt.Sprintf("http://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	p := &process.Process{Name: "etcd", Binary: filepath.Join(binDir, "etcd"), LogPath: filepath.Join(dir, "etcd.log"),
		Args: []string{"--name=apicost", "--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=" + url, "--advertise-client-urls=" + url,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL, "--initial-cluster=apicost=" + peerURL,
			// As test/membercluster: no fsync, fast self-election.
			"--unsafe-no-fsync", "--heartbeat-interval=10", "--election-timeout=100", "--log-level=warn"}}
	if err := p.Start(); err != nil {
		return nil, "", fmt.Errorf("etcd: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) {
				return p, url, nil
			}
		}
		select {
		case <-ctx.Done():
			p.Kill()
			return nil, "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.Kill()
	return nil, "", fmt.Errorf("etcd not healthy: %s", process.TailFile(p.LogPath, 20))
}

func printRows(rows []row) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "server\twire\tkind\twrite\twrites\tconflicts\twrites/s\tserver ms/write\tetcd ms/write\t")
	for _, r := range rows {
		n := float64(r.writes)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t\n", r.server, r.wire, r.kind, r.op, r.writes, r.conflicts,
			n/r.wall.Seconds(), 1000*r.serverCPU/n, 1000*r.etcdCPU/n)
	}
	w.Flush()
}

// wireCounter counts the replies by content type, to show which encoding
// the clients really got.
type wireCounter struct{ cbor, json, other atomic.Int64 }

func (c *wireCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			switch ct := resp.Header.Get("Content-Type"); {
			case strings.HasPrefix(ct, runtime.ContentTypeCBOR):
				c.cbor.Add(1)
			case strings.HasPrefix(ct, runtime.ContentTypeJSON):
				c.json.Add(1)
			default:
				c.other.Add(1)
			}
		}
		return resp, err
	})
}

func (c *wireCounter) String() string {
	cb, js := c.cbor.Load(), c.json.Load()
	switch {
	case cb > 0 && js == 0:
		return "cbor"
	case js > 0 && cb == 0:
		return "json"
	}
	return fmt.Sprintf("cbor %d/json %d", cb, js)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
