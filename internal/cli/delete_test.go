package cli

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDelete(t *testing.T) {
	const nginx = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nginx\n  namespace: shop\n"
	tests := []struct {
		name        string
		stdin       string
		args        []string
		wantCode    int
		wantStdout  string
		wantStderr  string
		wantRequest string
		wantGone    []objectKey
	}{
		{
			name: "every object found", stdin: nginx + "---\n" + configMap("nginx-conf"),
			args: []string{"-f", "-", "-n", "shop"}, wantCode: 0,
			wantStdout:  "deployment.apps/nginx deleted\nconfigmap/nginx-conf deleted\n",
			wantRequest: "POST " + deletePath + "?namespace=shop",
			wantGone:    []objectKey{{"apps", "Deployment", "shop", "nginx"}, {"", "ConfigMap", "shop", "nginx-conf"}},
		},
		{
			name: "one not found", stdin: nginx + "---\n" + configMap("nginx-conf"),
			args: []string{"-f", "-"}, wantCode: 1,
			wantStdout:  "deployment.apps/nginx deleted\nconfigmap/nginx-conf not found\n",
			wantStderr:  "error: 1 of 2 objects not found on the hub\n",
			wantRequest: "POST " + deletePath,
			wantGone:    []objectKey{{"apps", "Deployment", "shop", "nginx"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := newWorkloadHub(t)
			before := len(hub.storedKeys())
			r := runStdin(t, hub, tt.stdin, append([]string{"delete"}, tt.args...)...)
			wantExit(t, r, tt.wantCode)
			if r.stdout != tt.wantStdout || r.stderr != tt.wantStderr {
				t.Errorf("stdout %q, stderr %q; want %q and %q", r.stdout, r.stderr, tt.wantStdout, tt.wantStderr)
			}
			if diff := cmp.Diff([]string{tt.wantRequest}, hub.sent()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			stored := hub.storedKeys()
			for _, k := range tt.wantGone {
				if slices.Contains(stored, k) {
					t.Errorf("%v is still stored", k)
				}
			}
			if len(stored) != before-len(tt.wantGone) {
				t.Errorf("%d objects stored, want %d", len(stored), before-len(tt.wantGone))
			}
		})
	}
}
