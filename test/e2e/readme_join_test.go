package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/test/doccmd"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// The placeholders the README's join section shows, and what its sample
// output's expiry reads.
const (
	readmeToken      = "abcdef.0123456789abcdef"
	readmeHubAddress = "hub.example.com:7443"
	readmePin        = "sha256:4f1c..."
	readmeExpiry     = "2026-11-27T12:00:00Z"
)

var (
	printedToken   = regexp.MustCompile(`bootstrapToken=([a-z0-9]{6}\.[a-z0-9]{16})`)
	printedPin     = regexp.MustCompile(`hub\.caCertHash=(sha256:[0-9a-f]{64})`)
	printedAddress = regexp.MustCompile(`hub\.address=(\S+)`)
	rfc3339        = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
)

// TestReadmeJoin runs the README's "Join an edge cluster" against a real
// hub and a real member cluster: every command as written, with the
// README's placeholders (token, hub address, CA pin) replaced by the real
// ones. flotilla runs against the hub; kubectl and helm against the member
// cluster, except where a command's comment says "on the hub". There is no
// helm binary here: helm install is done as the chart tests do it (the
// Helm SDK's render of the chart with the command's values, server-side
// apply, the first pod run as its spec says). The sample output the README
// shows for token create must be what it prints.
func TestReadmeJoin(t *testing.T) {
	blocks := blockCommands(t, readmeSection(t, "Join an edge cluster"))
	tested := [][]string{
		{"flotilla token create", "flotilla token list"},
		{"helm install", "kubectl -n flotilla-system rollout status", "kubectl -n flotilla-system get lease", "kubectl get cluster"},
		{"flotilla token list"},
	}
	if diff := cmp.Diff(tested, commandPrefixes(blocks, tested)); diff != "" {
		t.Fatalf("the join section's commands changed: teach this test to run them (-tested +README):\n%s", diff)
	}
	chartrenderPath(t)
	env := membercluster.StartForTest(t, membercluster.ClusterSpec{Name: "edge-1"})
	// The chart's agent asks for a 40 s lease: the hub's default grace.
	j := &readmeJoin{t: t, hub: startHub(t, "--cluster-monitor-grace-period=40s"), member: env.Cluster("edge-1")}

	t.Run("token create prints what the README shows", func(t *testing.T) {
		j.t = t
		create := blocks[0][0]
		out := j.run(create)
		j.learn(out)
		if diff := cmp.Diff(create.Output, j.asReadme(out)); diff != "" {
			t.Errorf("README line %d: token create's sample output is stale (-README +printed):\n%s", create.Line, diff)
		}
	})
	t.Run("token list shows it, without the secret", func(t *testing.T) {
		j.t = t
		out := j.run(blocks[0][1])
		if !strings.Contains(out, j.token[:6]) || strings.Contains(out, j.token[7:]) {
			t.Errorf("token list:\n%s\nwant the ID %s and not the secret", out, j.token[:6])
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("helm install joins the cluster", func(t *testing.T) {
		j.t = t
		j.install(blocks[1][0])
		j.run(blocks[1][1])
		// KWOK reports the chart's pods Ready at once, where a kubelet
		// would wait for the agent's /readyz: wait for the election as
		// rollout status would have.
		j.waitLease("flotilla-system", "flotilla-agent")
		if out := j.run(blocks[1][2]); !strings.Contains(out, j.podName) {
			t.Errorf("the election Lease:\n%s\nwant it held by %s", out, j.podName)
		}
		waitReady(t, j.hub, "edge-1", 90*time.Second)
		out := j.run(blocks[1][3])
		for _, want := range []string{"True", "eu-west-1a", "eu-west-1", "aws"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get cluster edge-1 -o wide:\n%s\nwant %q", out, want)
			}
		}
	})
	t.Run("the join used the token up", func(t *testing.T) {
		j.t = t
		if out := j.run(blocks[2][0]); strings.Contains(out, j.token[:6]) {
			t.Errorf("token list after the join still shows %s:\n%s", j.token[:6], out)
		}
	})
}

// commandPrefixes is each README command cut to the length (in words) of
// the tested command at its place, so a comparison shows what changed.
func commandPrefixes(blocks [][]doccmd.Command, tested [][]string) [][]string {
	var got [][]string
	for i, b := range blocks {
		var lines []string
		for k, c := range b {
			words := len(c.Args)
			if i < len(tested) && k < len(tested[i]) {
				words = min(words, len(strings.Fields(tested[i][k])))
			}
			lines = append(lines, strings.Join(c.Args[:words], " "))
		}
		got = append(got, lines)
	}
	return got
}

// readmeJoin runs the join section's commands against a hub and a member.
type readmeJoin struct {
	t          *testing.T
	hub        *hub
	member     *membercluster.Cluster
	token, pin string // what token create printed
	address    string
	podName    string // the agent pod helm install's chart runs
}

// learn reads the real token, pin and hub address from token create's
// output.
func (j *readmeJoin) learn(out string) {
	j.t.Helper()
	token, pin, addr := printedToken.FindStringSubmatch(out), printedPin.FindStringSubmatch(out), printedAddress.FindStringSubmatch(out)
	if token == nil || pin == nil || addr == nil {
		j.t.Fatalf("token create printed no token, pin or hub address:\n%s", out)
	}
	j.token, j.pin, j.address = token[1], pin[1], addr[1]
}

// asReadme is token create's output with the real values put back to the
// README's placeholders, as lines.
func (j *readmeJoin) asReadme(out string) []string {
	out = strings.NewReplacer(j.token, readmeToken, j.pin, readmePin, j.address, readmeHubAddress).Replace(out)
	out = rfc3339.ReplaceAllString(out, readmeExpiry)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		lines = append(lines, strings.TrimRight(l, " "))
	}
	return lines
}

// real is the command's words with the README's placeholders replaced by
// the real values.
func (j *readmeJoin) real(c doccmd.Command) []string {
	r := strings.NewReplacer(readmeToken, j.token, readmePin, j.pin, readmeHubAddress, j.address)
	var args []string
	for _, a := range c.Args {
		args = append(args, r.Replace(a))
	}
	return args
}

// run runs a flotilla or kubectl command of the section and returns its
// output; it fails the test when the command fails.
func (j *readmeJoin) run(c doccmd.Command) string {
	j.t.Helper()
	args := j.real(c)
	onHub := strings.HasPrefix(c.Comment, "on the hub")
	var bin string
	switch {
	case args[0] == "flotilla":
		bin, args = filepath.Join(binDir, "flotilla"), append([]string{"--kubeconfig", j.hub.kubeconfig()}, args[1:]...)
	case args[0] == "kubectl" && onHub:
		bin, args = testbinTool(j.t, "kubectl"), append([]string{"--kubeconfig", j.hub.kubeconfig()}, args[1:]...)
	case args[0] == "kubectl":
		bin, args = testbinTool(j.t, "kubectl"), append([]string{"--kubeconfig", j.member.Kubeconfig}, args[1:]...)
	default:
		j.t.Fatalf("README line %d: this test does not know how to run %q", c.Line, c.String())
	}
	ctx, cancel := context.WithTimeout(j.t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		j.t.Fatalf("README line %d: %s: %v\n%s", c.Line, c.String(), err, out)
	}
	j.t.Logf("README line %d: %s\n%s", c.Line, c.String(), out)
	return string(out)
}

// install does what the section's helm install command does.
func (j *readmeJoin) install(c doccmd.Command) {
	j.t.Helper()
	install, err := helmInstallOf(j.real(c))
	if err != nil {
		j.t.Fatalf("README line %d: %v", c.Line, err)
	}
	inst := helmInstallAgent(j.t, j.member, install)
	j.podName = inst.pod.Name
}

// waitLease waits until the member cluster holds the Lease.
func (j *readmeJoin) waitLease(namespace, name string) {
	j.t.Helper()
	client, err := j.member.Clientset()
	if err != nil {
		j.t.Fatal(err)
	}
	waitFor(j.t, 60*time.Second, "Lease "+namespace+"/"+name, func() (bool, string) {
		l, err := client.CoordinationV1().Leases(namespace).Get(j.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity != nil, "no holder"
	})
}
