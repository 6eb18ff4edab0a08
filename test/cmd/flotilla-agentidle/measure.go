package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/procstat"
)

// result is one measurement window.
type result struct {
	label string
	// synced is how long the agent took from its start until the hub
	// showed the whole cluster (agents only).
	synced time.Duration
	// agent and apiserver figures: CPU in millicores over the window,
	// RSS mean and max of the samples, in MiB.
	agentCPU, agentRSS, agentRSSMax float64
	// agentAnon is the agent's mean anonymous RSS (heap, stacks), the
	// part that is not its binary's pages.
	agentAnon      float64
	apiCPU, apiRSS float64
	// requests counts the agent's requests to the member API server in
	// the window, by verb (agents only).
	requests map[string]float64
	// load is the 1-minute load average at the window's start and end.
	loadStart, loadEnd string
}

// procWindow accumulates one process's samples.
type procWindow struct {
	pid            int
	cpuStart       float64
	rssSum, rssMax float64
	anonSum        float64
	samples        int
	cpuEnd         float64
	start, finish  time.Time
	err            error
}

func startWindow(pid int) *procWindow {
	w := &procWindow{pid: pid, start: time.Now()}
	w.cpuStart, w.err = procstat.CPUSeconds(pid)
	return w
}

func (w *procWindow) sample() {
	rss, _, err := procstat.Memory(w.pid)
	if err != nil {
		w.err = err
		return
	}
	w.rssSum += rss
	w.anonSum += anonRSS(w.pid)
	w.rssMax = max(w.rssMax, rss)
	w.samples++
}

func (w *procWindow) end() {
	w.finish = time.Now()
	cpu, err := procstat.CPUSeconds(w.pid)
	if err != nil {
		w.err = err
	}
	w.cpuEnd = cpu
}

func (w *procWindow) milliCPU() float64 {
	return 1000 * (w.cpuEnd - w.cpuStart) / w.finish.Sub(w.start).Seconds()
}

func (w *procWindow) meanRSS() float64 { return w.rssSum / float64(max(w.samples, 1)) }

// measure samples the API server, and the agent if one runs (agent and its
// metrics address), over one window.
func measure(ctx context.Context, o options, label string, apiserver int, agent *runningAgent) (result, error) {
	r := result{label: label, loadStart: loadAverage()}
	api := startWindow(apiserver)
	var ag *procWindow
	var before map[string]float64
	if agent != nil {
		ag = startWindow(agent.pid)
		var err error
		if before, err = requestsByVerb(ctx, agent.metrics); err != nil {
			return r, err
		}
	}
	logf("%s: measuring for %v (load %s)", label, o.window, r.loadStart)
	deadline := time.Now().Add(o.window)
	for time.Now().Before(deadline) {
		api.sample()
		if ag != nil {
			ag.sample()
		}
		if !sleep(ctx, min(o.every, time.Until(deadline))) {
			return r, ctx.Err()
		}
	}
	api.end()
	r.apiCPU, r.apiRSS, r.loadEnd = api.milliCPU(), api.meanRSS(), loadAverage()
	if api.err != nil {
		return r, fmt.Errorf("kube-apiserver pid %d: %w", apiserver, api.err)
	}
	if ag == nil {
		return r, nil
	}
	ag.end()
	if ag.err != nil {
		return r, fmt.Errorf("agent pid %d: %w", agent.pid, ag.err)
	}
	r.agentCPU, r.agentRSS, r.agentRSSMax = ag.milliCPU(), ag.meanRSS(), ag.rssMax
	r.agentAnon = ag.anonSum / float64(max(ag.samples, 1))
	after, err := requestsByVerb(ctx, agent.metrics)
	if err != nil {
		return r, err
	}
	r.requests = map[string]float64{}
	for verb, n := range after {
		if d := n - before[verb]; d > 0 {
			r.requests[verb] = d
		}
	}
	return r, nil
}

// runningAgent is an agent process under measurement.
type runningAgent struct {
	pid     int
	metrics string // host:port of its /metrics
}

// measureAgent starts one agent binary, waits until the hub shows the
// whole cluster, settles, measures and stops the agent.
func measureAgent(ctx context.Context, o options, h *hub, cluster *membercluster.Cluster, apiserver int, bin string) (result, error) {
	label := agentLabel(bin)
	start := time.Now()
	proc, metrics, err := h.startAgent(agentPath(bin), label, cluster)
	if err != nil {
		return result{}, err
	}
	defer proc.Stop()
	if err := h.waitCapacity(ctx, cluster.Name, o.nodes, o.pods, start); err != nil {
		return result{}, fmt.Errorf("agent %s: %w", label, err)
	}
	synced := time.Since(start)
	logf("agent %s: the hub shows the whole cluster %v after the agent started; settling %v", label, synced.Round(time.Millisecond), o.settle)
	if !sleep(ctx, o.settle) {
		return result{}, ctx.Err()
	}
	r, err := measure(ctx, o, "agent "+label, apiserver, &runningAgent{pid: proc.Pid(), metrics: metrics})
	r.synced = synced
	if err != nil {
		return r, err
	}
	return r, proc.Stop()
}

// requestsByVerb reads the agent's client-go request counts by verb
// (rest_client_request_duration_seconds_count) from its /metrics. client-go
// labels them with the HTTP method: a list and a watch are both a GET.
func requestsByVerb(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent metrics: %w", err)
	}
	defer resp.Body.Close()
	return parseRequestCounts(resp.Body)
}

// parseRequestCounts sums rest_client_request_duration_seconds_count by
// its verb label.
func parseRequestCounts(r io.Reader) (map[string]float64, error) {
	const name = "rest_client_request_duration_seconds_count{"
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		labels, value, ok := strings.Cut(line[len(name):], "} ")
		if !ok {
			return nil, fmt.Errorf("agent metrics: cannot parse %q", line)
		}
		_, verb, _ := strings.Cut(labels, `verb="`)
		verb, _, _ = strings.Cut(verb, `"`)
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("agent metrics: %q: %w", line, err)
		}
		out[verb] += n
	}
	return out, sc.Err()
}

// anonRSS is a process's RssAnon in MiB, 0 if unknown.
func anonRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kib / 1024
		}
	}
	return 0
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

func printResults(w io.Writer, results []result) {
	fmt.Fprintf(w, "%-22s %10s %10s %10s %10s %14s %8s %12s %-26s %s\n",
		"window", "agent mCPU", "agent MiB", "(max MiB)", "(anon MiB)", "apiserver mCPU", "api MiB", "load 1m", "agent requests", "synced after")
	for _, r := range results {
		agentCPU, agentRSS, agentMax, agentAnon, synced, reqs := "-", "-", "-", "-", "-", "-"
		if r.requests != nil {
			agentCPU, agentRSS, agentMax = fmt.Sprintf("%.1f", r.agentCPU), fmt.Sprintf("%.1f", r.agentRSS), fmt.Sprintf("%.1f", r.agentRSSMax)
			agentAnon = fmt.Sprintf("%.1f", r.agentAnon)
			synced = r.synced.Round(100 * time.Millisecond).String()
			var parts []string
			for _, verb := range slices.Sorted(maps.Keys(r.requests)) {
				parts = append(parts, fmt.Sprintf("%s: %.0f", verb, r.requests[verb]))
			}
			reqs = strings.Join(parts, ", ")
		}
		fmt.Fprintf(w, "%-22s %10s %10s %10s %10s %14.1f %8.0f %12s %-26s %s\n",
			r.label, agentCPU, agentRSS, agentMax, agentAnon, r.apiCPU, r.apiRSS, r.loadStart+"→"+r.loadEnd, reqs, synced)
	}
}
