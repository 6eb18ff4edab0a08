package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// kubectl runs the real kubectl (built into .testbin) with a kubeconfig.
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	dir, err := membercluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustKubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := kubectl(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// userKubeconfig writes a kubeconfig for user, authenticated by a client
// certificate from the hub's CA, next to the admin one.
func userKubeconfig(t *testing.T, h *hub, user string) string {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(h.dataDir, "pki", "ca.crt"), filepath.Join(h.dataDir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Request{CommonName: user, Usage: pki.ClientAuth, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(h.kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	auth := cfg.AuthInfos[ctx.AuthInfo]
	auth.ClientCertificateData, auth.ClientKeyData = kp.CertPEM, kp.KeyPEM
	path := filepath.Join(filepath.Dir(h.dataDir), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func bindRole(t *testing.T, h *hub, user, role string) {
	t.Helper()
	client, err := kubernetes.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestKubectlAgainstHub drives the hub with the real kubectl: printer
// columns, a watch that sees a cluster go Unknown, explain, server-side
// apply conflicts, and RBAC with the shipped roles and the audit log.
func TestKubectlAgainstHub(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	h := startHub(t)
	a := startAgent(t, h, env.Cluster("member-1"))
	waitReady(t, h, "member-1", 30*time.Second)
	admin := h.kubeconfig()

	t.Run("version names the hub", func(t *testing.T) {
		out := mustKubectl(t, admin, "version")
		if !strings.Contains(out, "Server Version: v1.37.2+flotilla.") {
			t.Errorf("kubectl version:\n%s", out)
		}
	})

	t.Run("get clusters shows the printer columns", func(t *testing.T) {
		// The version comes with the agent's first status report, which
		// may follow Ready by a moment.
		var out string
		waitFor(t, 10*time.Second, "member-1 with its version", func() (bool, string) {
			out = mustKubectl(t, admin, "get", "clusters")
			return strings.Contains(out, "v1.37.2"), out
		})
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if strings.Join(header, " ") != "NAME READY TAINTS VERSION AGE" {
			t.Errorf("kubectl get clusters header %q:\n%s", header, out)
		}
		if !strings.Contains(out, "member-1") || !strings.Contains(out, "True") {
			t.Errorf("kubectl get clusters:\n%s", out)
		}
	})

	t.Run("explain", func(t *testing.T) {
		out := mustKubectl(t, admin, "explain", "propagationpolicy.spec.placement")
		if !strings.Contains(out, "clusterAffinity") || !strings.Contains(out, "replicaScheduling") {
			t.Errorf("kubectl explain propagationpolicy.spec.placement:\n%s", out)
		}
	})

	t.Run("server-side apply detects conflicts", func(t *testing.T) {
		dir := t.TempDir()
		write := func(name, value string) string {
			path := filepath.Join(dir, name)
			doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: default}\ndata: {owner: " + value + "}\n"
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
		mustKubectl(t, admin, "apply", "--server-side", "--field-manager=team-a", "-f", write("a.yaml", "a"))
		out, err := kubectl(t, admin, "apply", "--server-side", "--field-manager=team-b", "-f", write("b.yaml", "b"))
		if err == nil || !strings.Contains(out, "conflict") {
			t.Errorf("a second manager changing data.owner: err %v, want a conflict:\n%s", err, out)
		}
	})

	t.Run("RBAC: anonymous, viewer, operator; the audit log names each writer", func(t *testing.T) {
		anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: hubCAPool(t, h)}}}
		resp, err := anonymous.Get("https://" + h.apiAddr + "/apis/flotilla.io/v1alpha1/clusters")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("anonymous list of clusters: %s, want 401", resp.Status)
		}

		bindRole(t, h, "vera", "flotilla-viewer")
		bindRole(t, h, "otto", "flotilla-operator")
		viewer, operator := userKubeconfig(t, h, "vera"), userKubeconfig(t, h, "otto")
		taint := `{"spec":{"taints":[{"key":"example.com/maintenance","value":"planned","effect":"NoSchedule"}]}}`

		if out := mustKubectl(t, viewer, "get", "clusters"); !strings.Contains(out, "member-1") {
			t.Errorf("viewer get clusters:\n%s", out)
		}
		if out, err := kubectl(t, viewer, "patch", "cluster", "member-1", "--type=merge", "-p", taint); err == nil || !strings.Contains(out, "Forbidden") {
			t.Errorf("viewer taints member-1: err %v, want Forbidden:\n%s", err, out)
		}
		if out, err := kubectl(t, viewer, "create", "configmap", "by-vera", "-n", "default"); err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("viewer applies a template: err %v, want forbidden:\n%s", err, out)
		}
		mustKubectl(t, operator, "patch", "cluster", "member-1", "--type=merge", "-p", taint)
		waitFor(t, 10*time.Second, "the operator's taint on member-1", func() (bool, string) {
			c := h.cluster(t, "member-1")
			return hasTaint(c, "example.com/maintenance", "NoSchedule"), describe(c)
		})
		mustKubectl(t, operator, "create", "configmap", "by-otto", "-n", "default")
		rebalancer := filepath.Join(filepath.Dir(h.dataDir), "rebalance.yaml") // kubectl -f splits on commas, which test names have
		doc := "apiVersion: apps.flotilla.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: by-otto}\n" +
			"spec: {workloads: [{apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}]}\n"
		if err := os.WriteFile(rebalancer, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectl(t, viewer, "create", "-f", rebalancer); err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("viewer rebalances: err %v, want forbidden:\n%s", err, out)
		}
		mustKubectl(t, operator, "create", "-f", rebalancer)
		// Operators write Secrets as templates, but not bootstrap tokens;
		// and their reads of the tokens' namespace are audited.
		out, err := kubectl(t, operator, "create", "secret", "generic", "bootstrap-token-abcdef", "-n", "kube-system", "--type=bootstrap.kubernetes.io/token",
			"--from-literal=token-id=abcdef", "--from-literal=token-secret=0123456789abcdef", "--from-literal=usage-bootstrap-authentication=true")
		if err == nil || !strings.Contains(out, "bootstrap tokens let a member cluster join the fleet") {
			t.Errorf("operator creates a bootstrap token: err %v, want refused by admission:\n%s", err, out)
		}
		mustKubectl(t, operator, "get", "secrets", "-n", "kube-system")
		waitForAudit(t, h, map[string]string{"otto": "patch clusters", "flotilla-admin": "create clusterrolebindings"})
		waitForAudit(t, h, map[string]string{"otto": "create workloadrebalancers"})
		waitForAudit(t, h, map[string]string{"otto": "list secrets"})
	})

	t.Run("get clusters -w sees the cluster go Unknown", func(t *testing.T) {
		dir, err := membercluster.FindBinDir()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), testGrace+30*time.Second)
		defer cancel()
		watch := exec.CommandContext(ctx, filepath.Join(dir, "kubectl"), "--kubeconfig", admin, "get", "clusters", "-w")
		stdout, err := watch.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		lines := make(chan string)
		wg.Go(func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			_ = watch.Wait()
		})
		if err := a.Kill(); err != nil {
			t.Fatal(err)
		}
		var seen []string
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl get clusters -w ended without showing Unknown:\n%s", strings.Join(seen, "\n"))
				}
				seen = append(seen, line)
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "member-1" && f[1] == "Unknown" {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no Unknown for member-1 in kubectl get clusters -w:\n%s", strings.Join(seen, "\n"))
			}
		}
	})
}

func hubCAPool(t *testing.T, h *hub) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(h.dataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

// waitForAudit waits until the hub's audit log (DATA/audit.log, the
// default) holds, for each user, a write with that "verb resource".
func waitForAudit(t *testing.T, h *hub, want map[string]string) {
	t.Helper()
	path := filepath.Join(h.dataDir, "audit.log")
	waitFor(t, 10*time.Second, "audit events", func() (bool, string) {
		data, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		found := map[string]bool{}
		for line := range strings.Lines(string(data)) {
			var ev struct {
				Verb      string `json:"verb"`
				User      struct{ Username string }
				ObjectRef struct{ Resource string }
			}
			if json.Unmarshal([]byte(line), &ev) == nil && want[ev.User.Username] == ev.Verb+" "+ev.ObjectRef.Resource {
				found[ev.User.Username] = true
			}
		}
		return len(found) == len(want), "found " + strings.Join(keys(found), ",")
	})
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// watchProcess is hubwatch: client-go informers in a process of their own.
type watchProcess struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // a line arrived
}

// startWatch runs hubwatch against the hub for the resources
// (RESOURCE.VERSION.GROUP) until the test ends, and waits until its
// informers have synced.
func startWatch(t *testing.T, h *hub, resources ...string) *watchProcess {
	t.Helper()
	args := []string{"--kubeconfig", h.kubeconfig()}
	for _, r := range resources {
		args = append(args, "--resource", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "hubwatch"), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchProcess{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	w.waitLine(t, "SYNCED")
	return w
}

// waitLine waits until hubwatch printed a line starting with prefix.
func (w *watchProcess) waitLine(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		for _, line := range w.lines {
			if strings.HasPrefix(line, prefix) {
				w.mu.Unlock()
				return
			}
		}
		seen := len(w.lines)
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-timeout:
			t.Fatalf("hubwatch printed no line starting with %q in 30s (%d lines)", prefix, seen)
		}
	}
}
