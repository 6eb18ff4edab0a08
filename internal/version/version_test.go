package version

import (
	"os"
	"strings"
	"testing"
)

func TestKubernetesMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" {
			if fields[1] != Kubernetes {
				t.Errorf("go.mod requires k8s.io/kubernetes %s, version.Kubernetes is %s", fields[1], Kubernetes)
			}
			return
		}
	}
	t.Error("go.mod does not require k8s.io/kubernetes")
}

func TestKubernetesGitVersionIsSemver(t *testing.T) {
	tests := []struct{ flotilla, want string }{
		{"v0.3.0", "v1.37.2+flotilla.0.3.0"},
		{"devel-0123456789ab-dirty", "v1.37.2+flotilla.devel-0123456789ab-dirty"},
		{"v0.0.0-20261125001234-abcdef123456+incompatible", "v1.37.2+flotilla.0.0.0-20261125001234-abcdef123456-incompatible"},
	}
	for _, tt := range tests {
		got := Info{Flotilla: tt.flotilla, Kubernetes: Kubernetes}.KubernetesGitVersion()
		if got != tt.want {
			t.Errorf("KubernetesGitVersion(%q) = %q, want %q", tt.flotilla, got, tt.want)
		}
		if strings.Count(got, "+") != 1 {
			t.Errorf("%q: want exactly one '+'", got)
		}
	}
}
