package cli

import (
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "error: no command given; supported commands: get, describe, apply, delete, plan, taint, cordon, uncordon, rebalance, purge\nSee 'flotilla --help' for usage.\n"},
		{"unknown command", []string{"drain", "cluster", "x"}, "error: unknown command \"drain\"; supported commands: get, describe, apply, delete, plan, taint, cordon, uncordon, rebalance, purge\nSee 'flotilla --help' for usage.\n"},
		{"unknown global flag", []string{"--colour", "get", "clusters"}, "error: unknown flag: --colour\nSee 'flotilla --help' for usage.\n"},
		{"get without resource", []string{"get"}, "error: missing the resource type; supported: clusters, leases, policies, clusterpolicies, bindings, clusterbindings, works, resources, workloadrebalancers\nSee 'flotilla get --help' for usage.\n"},
		{"get unknown resource", []string{"get", "pods"}, "error: unknown resource type \"pods\"; supported: clusters, leases, policies, clusterpolicies, bindings, clusterbindings, works, resources, workloadrebalancers\nSee 'flotilla get --help' for usage.\n"},
		{"get too many names", []string{"get", "clusters", "a", "b"}, "error: too many arguments [\"clusters\" \"a\" \"b\"]: give one resource type and at most one name\nSee 'flotilla get --help' for usage.\n"},
		{"get bad output", []string{"get", "clusters", "-o", "table"}, "error: invalid --output \"table\": must be one of wide, json, yaml (or none, for a table)\nSee 'flotilla get --help' for usage.\n"},
		{"describe leases", []string{"describe", "lease", "edge-1"}, "error: unknown resource type \"lease\"; supported: cluster, binding, clusterbinding, workloadrebalancer\nSee 'flotilla describe --help' for usage.\n"},
		{"describe two names", []string{"describe", "cluster", "a", "b"}, "error: too many arguments [\"b\"]: describe takes one name\nSee 'flotilla describe --help' for usage.\n"},
		{"bad server", []string{"get", "clusters", "--server", "127.0.0.1:7080"}, "error: invalid --server \"127.0.0.1:7080\": must be an http:// or https:// URL such as http://127.0.0.1:7080\nSee 'flotilla get --help' for usage.\n"},
		{"negative timeout", []string{"--timeout=-1s", "cordon", "a"}, "error: invalid --timeout -1s: must not be negative\nSee 'flotilla cordon --help' for usage.\n"},
		{"bad timeout", []string{"cordon", "a", "--timeout", "soon"}, "error: invalid argument \"soon\" for \"--timeout\" flag: must be a duration like \"30s\" or \"5m\"\nSee 'flotilla cordon --help' for usage.\n"},
		{"help of unknown command", []string{"help", "drain"}, "error: unknown command \"drain\"; supported commands: get, describe, apply, delete, plan, taint, cordon, uncordon, rebalance, purge\nSee 'flotilla --help' for usage.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := newFixtureHub(t)
			r := run(t, hub, tt.args...)
			wantExit(t, r, 2)
			if r.stderr != tt.want {
				t.Errorf("stderr =\n%q\nwant\n%q", r.stderr, tt.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if sent := hub.sent(); len(sent) != 0 {
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
			"  rebalance   Reschedule workloads from scratch", "--server URL", "FLOTILLA_TOKEN"}},
		{[]string{"help"}, []string{"Commands:"}},
		{[]string{"-h", "get", "clusters"}, []string{"Commands:"}},
		{[]string{"get", "-h"}, []string{"flotilla get RESOURCE [NAME] [-n NAMESPACE | -A] [--cluster NAME] [-o wide|json|yaml]",
			"-o, --output FORMAT", "-A, --all-namespaces", "--cluster NAME", "clusterbindings", "Examples:", "Global flags:"}},
		{[]string{"help", "get"}, []string{"flotilla get RESOURCE [NAME]"}},
		{[]string{"describe", "cluster", "x", "--help"}, []string{"flotilla describe cluster|binding|clusterbinding|workloadrebalancer NAME", "Examples:"}},
		{[]string{"describe", "-h"}, []string{"-n, --namespace NAMESPACE", "flotilla describe binding nginx-deployment -n shop"}},
		{[]string{"apply", "-h"}, []string{"flotilla apply -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R] [--dry-run]",
			"-f, --filename FILE", "-R, --recursive", "--dry-run", "nothing is\napplied", "flotilla apply -f -\n"}},
		{[]string{"help", "delete"}, []string{"flotilla delete -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R]",
			"Any object not found makes\nflotilla exit with status 1", "flotilla delete -f nginx.yaml"}},
		{[]string{"taint", "--help"}, []string{"key:Effect-", "--overwrite", "flotilla taint cluster edge-1 maintenance-"}},
		{[]string{"cordon", "-h"}, []string{"flotilla cordon NAME", "cluster.flotilla.io/unschedulable:NoSchedule"}},
		{[]string{"uncordon", "-h"}, []string{"flotilla uncordon NAME"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			hub := newFixtureHub(t)
			r := run(t, hub, tt.args...)
			wantExit(t, r, 0)
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("help lacks %q:\n%s", w, r.stdout)
				}
			}
			if r.stderr != "" || len(hub.sent()) != 0 {
				t.Errorf("stderr %q, requests %q; want neither", r.stderr, hub.sent())
			}
		})
	}
}
