package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// measurePage signs in to the dashboard in headless Chromium and prints
// the time to draw the whole fleet, the API change → page delay of
// o.cordons cordons, and the long tasks while renewals stream in.
func measurePage(ctx context.Context, hub *hubClient, token string, o options, out io.Writer) error {
	profile, err := os.MkdirTemp("", "flotilla-dashload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(o.chromium), chromedp.UserDataDir(profile), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1500, 900))...)
	defer cancelAlloc()
	tab, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(tab); err != nil {
		return fmt.Errorf("start %s: %w", o.chromium, err)
	}
	clusters, err := hub.flotilla.FlotillaV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(clusters.Items))
	for _, c := range clusters.Items {
		names = append(names, c.Name)
	}
	if err := signIn(tab, hub.httpAddr, token, len(names), out); err != nil {
		return err
	}
	if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](`window.__long = []; new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); }).observe({type: "longtask"}); true`)); err != nil {
		return err
	}
	if err := cordonDelays(ctx, tab, hub, names, o.cordons, out); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.watch):
	}
	return pageSummary(tab, o, out)
}

// signIn opens the page, signs in with token and waits for every cluster
// to be in the fleet view.
func signIn(tab context.Context, httpAddr, token string, n int, out io.Writer) error {
	if err := chromedp.Do(tab, chromedp.Navigate("http://"+httpAddr+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), token)); err != nil {
		return fmt.Errorf("open the dashboard: %w", err)
	}
	start := time.Now()
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#signin-button"))); err != nil {
		return err
	}
	want := fmt.Sprintf("%d of %d clusters", n, n)
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](fmt.Sprintf("document.getElementById('shown').textContent === %q", want),
		chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		return fmt.Errorf("wait for %q: %w", want, err)
	}
	fmt.Fprintf(out, "sign-in click to %q drawn: %v\n", want, time.Since(start).Round(time.Millisecond))
	return nil
}

// cordonDelays flips Spec.Unschedulable of up to n clusters spread over
// names through the API and times each until the page's state has it.
func cordonDelays(ctx, tab context.Context, hub *hubClient, names []string, n int, out io.Writer) error {
	var delays []time.Duration
	for i := 0; i < n && i < len(names); i++ {
		name := names[(i*997)%len(names)]
		clusters := hub.flotilla.FlotillaV1alpha1().Clusters()
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.Unschedulable = !c.Spec.Unschedulable
		sent := time.Now()
		if _, err := clusters.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("cordon %s: %w", name, err)
		}
		shown := fmt.Sprintf("state.clusters.get(%q).cordoned === %v", name, c.Spec.Unschedulable)
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](shown, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			return fmt.Errorf("page never showed the cordon of %s: %w", name, err)
		}
		delays = append(delays, time.Since(sent))
	}
	if len(delays) > 0 {
		slices.Sort(delays)
		fmt.Fprintf(out, "cordon through the API → page: min %v, p50 %v, max %v (%d)\n", delays[0].Round(time.Millisecond),
			delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond), len(delays))
	}
	return nil
}

// pageSummary prints the long tasks seen and the fleet's freshness as the
// page computes it, and saves the screenshot.
func pageSummary(tab context.Context, o options, out io.Writer) error {
	long, err := chromedp.Run(tab, chromedp.Evaluate[[]float64](`window.__long`))
	if err != nil {
		return err
	}
	slices.Sort(long)
	fmt.Fprintf(out, "long tasks (> 50 ms) in %v after the cordons: %d", o.watch, len(long))
	if len(long) > 0 {
		fmt.Fprintf(out, ", p50 %.0f ms, longest %.0f ms", long[len(long)/2], long[len(long)-1])
	}
	fmt.Fprintln(out)
	fresh, err := chromedp.Run(tab, chromedp.Evaluate[map[string]int](`(() => { const n = {}; for (const c of state.clusters.values()) { const k = lease(c).cls; n[k] = (n[k] || 0) + 1; } return n; })()`))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "leases as the page sees them: %v\n", fresh)
	if o.screenshot == "" {
		return nil
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	return os.WriteFile(o.screenshot, png, 0o644)
}
