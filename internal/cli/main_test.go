package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/internal/version"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "error: no command given; supported commands: get, describe, apply, delete, plan, taint, cordon, uncordon, rebalance, purge, token, version\nSee 'flotilla --help' for usage.\n"},
		{"unknown command", []string{"drain", "cluster", "x"}, "error: unknown command \"drain\"; supported commands: get, describe, apply, delete, plan, taint, cordon, uncordon, rebalance, purge, token, version\nSee 'flotilla --help' for usage.\n"},
		{"unknown global flag", []string{"--colour", "get", "clusters"}, "error: unknown flag: --colour\nSee 'flotilla --help' for usage.\n"},
		{"get without resource", []string{"get"}, "error: missing the resource type; supported: clusters, leases, policies, clusterpolicies, bindings, clusterbindings, works, resources, workloadrebalancers\nSee 'flotilla get --help' for usage.\n"},
		{"get unknown resource", []string{"get", "pods"}, "error: unknown resource type \"pods\"; supported: clusters, leases, policies, clusterpolicies, bindings, clusterbindings, works, resources, workloadrebalancers\nSee 'flotilla get --help' for usage.\n"},
		{"get too many names", []string{"get", "clusters", "a", "b"}, "error: too many arguments [\"clusters\" \"a\" \"b\"]: give one resource type and at most one name\nSee 'flotilla get --help' for usage.\n"},
		{"get bad output", []string{"get", "clusters", "-o", "table"}, "error: invalid --output \"table\": must be one of wide, json, yaml (or none, for a table)\nSee 'flotilla get --help' for usage.\n"},
		{"describe leases", []string{"describe", "lease", "edge-1"}, "error: unknown resource type \"lease\"; supported: cluster, binding, clusterbinding, workloadrebalancer\nSee 'flotilla describe --help' for usage.\n"},
		{"describe two names", []string{"describe", "cluster", "a", "b"}, "error: too many arguments [\"b\"]: describe takes one name\nSee 'flotilla describe --help' for usage.\n"},
		{"the old --server", []string{"get", "clusters", "--server", "http://127.0.0.1:7080"}, "error: unknown flag: --server\nSee 'flotilla get --help' for usage.\n"},
		{"version with arguments", []string{"version", "now"}, "error: unexpected arguments [\"now\"]\nSee 'flotilla version --help' for usage.\n"},
		{"--version is flotilla's", []string{"get", "--version"}, "error: unknown flag: --version\nSee 'flotilla get --help' for usage.\n"},
		{"negative timeout", []string{"--timeout=-1s", "cordon", "a"}, "error: invalid --timeout -1s: must not be negative\nSee 'flotilla cordon --help' for usage.\n"},
		{"bad timeout", []string{"cordon", "a", "--timeout", "soon"}, "error: invalid argument \"soon\" for \"--timeout\" flag: must be a duration like \"30s\" or \"5m\"\nSee 'flotilla cordon --help' for usage.\n"},
		{"help of unknown command", []string{"help", "drain"}, "error: unknown command \"drain\"; supported commands: get, describe, apply, delete, plan, taint, cordon, uncordon, rebalance, purge, token, version\nSee 'flotilla --help' for usage.\n"},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, 2)
			if r.stderr != tt.want {
				t.Errorf("stderr =\n%q\nwant\n%q", r.stderr, tt.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if sent := h.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string // in stdout
	}{
		{[]string{"--help"}, []string{"Usage:\n  flotilla [global flags] COMMAND", "Commands:", "  taint       Add or remove taints",
			"  apply       Create or update resource templates", "  delete      Delete resource templates",
			"  rebalance   Reschedule workloads from scratch", "  version     Print the version", "--kubeconfig FILE", "--context CONTEXT",
			"--version", "KUBECONFIG", "kubectl flotilla get clusters", "flotilla --kubeconfig /var/lib/flotilla/admin.kubeconfig get clusters"}},
		{[]string{"help"}, []string{"Commands:"}},
		{[]string{"-h", "get", "clusters"}, []string{"Commands:"}},
		{[]string{"get", "-h"}, []string{"flotilla get RESOURCE [NAME] [-n NAMESPACE | -A] [--cluster NAME] [-o wide|json|yaml]",
			"-o, --output FORMAT", "-A, --all-namespaces", "--cluster NAME", "clusterbindings", "Examples:", "Global flags:"}},
		{[]string{"help", "get"}, []string{"flotilla get RESOURCE [NAME]"}},
		{[]string{"describe", "cluster", "x", "--help"}, []string{"flotilla describe cluster|binding|clusterbinding|workloadrebalancer NAME", "Examples:"}},
		{[]string{"describe", "-h"}, []string{"-n, --namespace NAMESPACE", "flotilla describe binding nginx-deployment -n shop"}},
		{[]string{"apply", "-h"}, []string{"flotilla apply -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R] [--dry-run]",
			"-f, --filename FILE", "-R, --recursive", "--dry-run", "server-side dry run", "field manager \"flotilla\"",
			"changes nothing, as far as the API allows", "flotilla apply -f -\n"}},
		{[]string{"help", "delete"}, []string{"flotilla delete -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R]",
			"Any object not found makes flotilla exit with status", "flotilla delete -f nginx.yaml"}},
		{[]string{"taint", "--help"}, []string{"key:Effect-", "--overwrite", "flotilla taint cluster edge-1 maintenance-"}},
		{[]string{"cordon", "-h"}, []string{"flotilla cordon NAME", "cluster.flotilla.io/unschedulable:NoSchedule", "Update of the Cluster"}},
		{[]string{"purge", "-h"}, []string{"PurgeRequest", "--timeout DURATION", "--cluster CLUSTER"}},
		{[]string{"version", "-h"}, []string{"flotilla version [--client]", "v1.37.2+flotilla.VERSION"}},
		{[]string{"get", "-h"}, []string{"--kubeconfig FILE", "time limit of each request"}},
		{[]string{"uncordon", "-h"}, []string{"flotilla uncordon NAME"}},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, 0)
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("help lacks %q:\n%s", w, r.stdout)
				}
			}
			if r.stderr != "" || len(h.sent()) != 0 {
				t.Errorf("stderr %q, requests %q; want neither", r.stderr, h.sent())
			}
		})
	}
}

func TestVersion(t *testing.T) {
	h := newHub(t)
	client := "Client Version: " + version.Get().String() + "\n"
	for _, args := range [][]string{{"--version"}, {"version", "--client"}} {
		r := h.run(t, args...)
		wantExit(t, r, 0)
		want := client
		if args[0] == "--version" {
			want = version.Get().String() + "\n"
		}
		if r.stdout != want || len(h.sent()) != 0 {
			t.Errorf("%q: stdout %q, requests %q; want %q and none", args, r.stdout, h.sent(), want)
		}
	}
	server, err := h.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	r := h.run(t, "version")
	wantExit(t, r, 0)
	if want := client + "Server Version: " + server.GitVersion + "\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	if diff := cmp.Diff([]string{"GET /version"}, h.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// kubectl runs kubectl-flotilla with its path first ("kubectl flotilla get
// clusters"): the same commands, and help that says how it was run.
func TestKubectlPlugin(t *testing.T) {
	f := newFixtureHub(t)
	t.Setenv("KUBECONFIG", f.Kubeconfig)
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"/usr/local/bin/kubectl-flotilla", "get", "clusters"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "edge-1   True") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	code = Main(t.Context(), []string{"kubectl-flotilla", "get", "--help"}, &stdout, &stderr)
	for _, want := range []string{"Usage:\n  kubectl flotilla get RESOURCE", "\n  kubectl flotilla get clusters -o wide\n"} {
		if code != 0 || !strings.Contains(stdout.String(), want) {
			t.Errorf("exit %d; help lacks %q:\n%s", code, want, stdout.String())
		}
	}
	stdout.Reset()
	Main(t.Context(), []string{"kubectl-flotilla", "--help"}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "Usage:\n  kubectl flotilla [global flags] COMMAND") ||
		!strings.Contains(stdout.String(), "Run 'kubectl flotilla COMMAND --help'") {
		t.Errorf("top help:\n%s", stdout.String())
	}
	stderr.Reset()
	if code := Main(t.Context(), []string{"kubectl-flotilla", "get"}, &stdout, &stderr); code != 2 ||
		!strings.HasSuffix(stderr.String(), "See 'kubectl flotilla get --help' for usage.\n") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := Main(t.Context(), []string{"/usr/bin/flotilla", "get"}, &stdout, &stderr); code != 2 ||
		!strings.HasSuffix(stderr.String(), "See 'flotilla get --help' for usage.\n") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
