package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/syncbuf"
	"github.com/flotilla-io/flotilla/test/doccmd"
	"github.com/flotilla-io/flotilla/test/process"
)

// repoRoot is the checkout this test runs in.
const repoRoot = "../.."

// readmeSection is the README's section under heading.
func readmeSection(t *testing.T, heading string) doccmd.Section {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := doccmd.FindSection(string(page), heading)
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	return sec
}

// blockCommands are the commands of the section's sh blocks, one list per
// block.
func blockCommands(t *testing.T, sec doccmd.Section) [][]doccmd.Command {
	t.Helper()
	var blocks [][]doccmd.Command
	for _, b := range sec.Blocks("sh") {
		cmds, err := b.Commands()
		if err != nil {
			t.Fatalf("README.md, section %q: %v", sec.Heading, err)
		}
		blocks = append(blocks, cmds)
	}
	return blocks
}

// commandLines is each block's commands as lines, for comparing a
// section's commands with what its test knows how to run.
func commandLines(blocks [][]doccmd.Command) [][]string {
	var lines [][]string
	for _, b := range blocks {
		var l []string
		for _, c := range b {
			l = append(l, c.String())
		}
		lines = append(lines, l)
	}
	return lines
}

// TestReadmeQuickStart runs the README's quick start as a reader would.
// Its block holds `make demo` and `make test`: `make test` must be what CI
// runs, and `make demo` is run here as typed (with DEMO_DIR pointing into
// the test's folder), in a process group of its own as in a terminal. The
// commands the section suggests for another terminal must work against
// it, the failover must play as the section tells, and Ctrl-C must stop
// every process it started.
func TestReadmeQuickStart(t *testing.T) {
	sec := readmeSection(t, "Quick start")
	blocks := blockCommands(t, sec)
	if diff := cmp.Diff([][]string{{"make demo", "make test"}}, commandLines(blocks)); diff != "" {
		t.Fatalf("the quick start's commands changed: teach this test to run them (-tested +README):\n%s", diff)
	}
	t.Run("make test is what CI runs", func(t *testing.T) {
		checkCIRuns(t, blocks[0][1].Args)
	})

	demo := startDemo(t, blocks[0][0].Args)
	demo.waitOutput(t, 15*time.Minute, "==> agents started")
	t.Run("the commands for another terminal work", func(t *testing.T) {
		runQuickStartInline(t, demo, sec.InlineCode())
	})
	t.Run("the failover plays as told", func(t *testing.T) {
		checkDemoStory(t, demo)
	})
	t.Run("Ctrl-C stops every process", func(t *testing.T) {
		demo.interrupt(t)
		if !strings.Contains(demo.output(), "==> stopping (Ctrl-C)") {
			t.Errorf("the demo did not say it stops; its output ends:\n%s", tail(demo.output(), 20))
		}
		if left := processesUsing(demo.dir); len(left) > 0 {
			t.Errorf("still running after Ctrl-C:\n%s", strings.Join(left, "\n"))
		}
	})
}

// checkCIRuns checks that .ci/run runs the command args.
func checkCIRuns(t *testing.T, args []string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	calls, err := doccmd.Calls(".ci/run", script)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(calls, func(c []string) bool { return slices.Equal(c, args) }) {
		t.Errorf(".ci/run does not run %q; it runs %q", strings.Join(args, " "), calls)
	}
}

// demoRun is `make demo` running in a process group of its own.
type demoRun struct {
	cmd  *exec.Cmd
	dir  string // its DEMO_DIR
	hub  *hub   // the demo's hub, for reading its API
	done chan struct{}
	out  syncbuf.Buffer // make's stdout and stderr
}

func (d *demoRun) output() string { return d.out.String() }

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// processesUsing lists the processes whose command line mentions dir, as
// "pid: command line".
func processesUsing(dir string) []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(raw, []byte(dir)) {
			continue
		}
		pid := filepath.Base(filepath.Dir(p))
		found = append(found, pid+": "+string(bytes.ReplaceAll(bytes.TrimRight(raw, "\x00"), []byte{0}, []byte(" "))))
	}
	return found
}

// startDemo runs args (make demo) in the repository's root, with the
// demo's folder in the test's, and stops it and everything it started
// when the test ends.
func startDemo(t *testing.T, args []string) *demoRun {
	t.Helper()
	d := &demoRun{dir: t.TempDir(), done: make(chan struct{})}
	d.hub = &hub{dataDir: filepath.Join(d.dir, "hub"), httpAddr: "127.0.0.1:7080"}
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Dir = repoRoot
	// As typed in a terminal: none of the make that runs these tests.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	d.cmd.Env = append(env, "DEMO_DIR="+d.dir)
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.cmd.WaitDelay = 10 * time.Second // a leftover holding the output pipe must not hang Wait
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("make demo's output ends:\n%s", tail(d.output(), 60))
			t.Logf("the demo's hub log ends:\n%s", process.TailFile(filepath.Join(d.dir, "hub.log"), 40))
		}
	})
	return d
}

// interrupt sends SIGINT to the demo's process group, as Ctrl-C in its
// terminal would, and waits for make to exit.
func (d *demoRun) interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT to make demo: %v", err)
	}
	select {
	case <-d.done:
	case <-time.After(90 * time.Second):
		t.Fatal("make demo still running 90 s after Ctrl-C")
	}
}

// stop ends whatever a failed test left: Ctrl-C, then SIGKILL to the group,
// then any process still using the demo's folder.
func (d *demoRun) stop(t *testing.T) {
	select {
	case <-d.done:
	default:
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-d.done:
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
	}
	for _, p := range processesUsing(d.dir) {
		t.Errorf("killing a process the demo left: %s", p)
		pid, _, _ := strings.Cut(p, ":")
		if n, err := strconv.Atoi(pid); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
}

// waitOutput waits until the demo printed want.
func (d *demoRun) waitOutput(t *testing.T, timeout time.Duration, want string) {
	t.Helper()
	waitFor(t, timeout, "make demo to print "+want, func() (bool, string) {
		select {
		case <-d.done:
			t.Fatalf("make demo exited before printing %q:\n%s", want, tail(d.output(), 40))
		default:
		}
		return strings.Contains(d.output(), want), tail(d.output(), 1)
	})
}

// runQuickStartInline runs the commands the section's prose shows (bin/
// and .testbin/ commands, after its export KUBECONFIG=...) against the
// running demo; a watch (-w) runs until it has shown every cluster.
func runQuickStartInline(t *testing.T, demo *demoRun, spans []string) {
	const export = "export KUBECONFIG=.demo/hub/admin.kubeconfig"
	if !slices.Contains(spans, export) {
		t.Fatalf("the quick start no longer shows %q: teach this test its KUBECONFIG", export)
	}
	env := append(os.Environ(), "KUBECONFIG="+demo.hub.kubeconfig())
	var ran []string
	for _, span := range spans {
		if !strings.HasPrefix(span, "bin/") && !strings.HasPrefix(span, ".testbin/") {
			continue
		}
		if strings.ContainsAny(span, `'"$|><;&`) {
			t.Errorf("%q: quoting and shell syntax are not expected in an inline command", span)
			continue
		}
		ran = append(ran, span)
		args := strings.Fields(span)
		if slices.Contains(args, "-w") {
			watchUntil(t, env, args, "member-1", "member-2", "member-3")
			continue
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = repoRoot, env
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) == 0 {
			t.Errorf("%s: %v\n%s", span, err, out)
		}
	}
	if len(ran) < 5 {
		t.Errorf("ran only %q from the quick start's prose; want its bin/flotilla and .testbin/kubectl commands", ran)
	}
	t.Logf("ran the quick start's inline commands: %q", ran)
}

// watchUntil runs a watching command until its output shows every one of
// want, then stops it.
func watchUntil(t *testing.T, env, args []string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out syncbuf.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = repoRoot, env, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	waitFor(t, 30*time.Second, strings.Join(args, " ")+" to show "+strings.Join(want, ", "), func() (bool, string) {
		s := out.String()
		return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(s, w) }), s
	})
}

// checkDemoStory follows the failure the quick start describes on the
// demo's hub: member-1 Unknown and tainted NoSchedule, then NoExecute,
// nginx moved whole to member-2, member-1 back Ready and untainted, and
// the rebalance putting nginx back 1:2. It logs when each happened after
// the kill, beside what the README says.
func checkDemoStory(t *testing.T, demo *demoRun) {
	h := demo.hub
	demo.waitOutput(t, 2*time.Minute, "==> killing the agent of member-1")
	killed := time.Now()
	since := func(what, readme string) {
		t.Logf("%s %v after the kill (the README: %s)", what, time.Since(killed).Round(time.Second), readme)
	}
	waitFor(t, 60*time.Second, "member-1 Unknown with unreachable:NoSchedule", func() (bool, string) {
		c := h.cluster(t, "member-1")
		return readyOf(c) == metav1.ConditionUnknown && hasTaint(c, v1alpha1.TaintClusterUnreachable, "NoSchedule"), describe(c)
	})
	since("member-1 Unknown and unreachable:NoSchedule", "10 s")
	waitFor(t, 90*time.Second, "member-1 unreachable:NoExecute", func() (bool, string) {
		c := h.cluster(t, "member-1")
		return hasTaint(c, v1alpha1.TaintClusterUnreachable, "NoExecute"), describe(c)
	})
	since("unreachable:NoExecute", "40 s")
	waitPlacement(t, h, map[string]int32{"member-2": 3})
	since("nginx's 3 replicas all on member-2", "about 50 s")

	demo.waitOutput(t, 2*time.Minute, "==> starting the agent again")
	since("the agent restarted", "80 s")
	waitReady(t, h, "member-1", 60*time.Second)
	since("member-1 Ready with no taints", "a few seconds after the restart")
	demo.waitOutput(t, 2*time.Minute, "==> rebalancing")
	waitPlacement(t, h, map[string]int32{"member-1": 1, "member-2": 2})
	since("nginx back 1:2 after the rebalance", "95 s")
}

// waitPlacement waits until the demo's nginx binding places want.
func waitPlacement(t *testing.T, h *hub, want map[string]int32) {
	t.Helper()
	f := &fleet{t: t, hub: h}
	waitFor(t, 90*time.Second, "nginx placed as "+fmt.Sprint(want), func() (bool, string) {
		b := f.binding("default", "nginx-deployment")
		if b == nil {
			return false, "no binding"
		}
		return cmp.Equal(b.Spec.Clusters, targetsOf(want)), fmt.Sprint(b.Spec.Clusters)
	})
}
