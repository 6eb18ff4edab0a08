package binding_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/apiwrites"
)

// BenchmarkPipeline measures the hub's side of propagation without agents:
// 1,000 Deployments created at once (8 clients in parallel) over 3
// clusters, until every binding is scheduled and every Work exists. It
// reports bindings/s and Works/s, and the controllers' API writes per
// binding (counted on their clients' transport until they stop writing;
// the Deployment's create is the benchmark's, not counted), with their
// breakdown by resource, subresource and verb in the log. The controllers
// share one set of clients (QPS 500, burst 1000, as the hub's) and run the
// hub's workers (controller.DefaultWorkers each). The API server runs on
// the same machine, so its CPU counts too.
func BenchmarkPipeline(b *testing.B) {
	const bindings, clusters, writers = 1000, 3, 8
	var total time.Duration
	writes, conflicts := apiwrites.Counts{}, apiwrites.Counts{}
	for range b.N {
		b.StopTimer()
		p := startPipeline(b, "member1", "member2", "member3")
		p.apply(weighted2)
		deployments := make([]*appsv1.Deployment, bindings)
		for i := range deployments {
			labels := map[string]string{"bench": "yes", "app": fmt.Sprintf("app-%05d", i)}
			deployments[i] = &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i), Labels: labels},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
			}
		}
		ctx, cancel := context.WithCancel(b.Context())
		events := watchWorks(ctx, b, p)

		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := w; i < bindings; i += writers {
					if _, err := p.env.Kube.AppsV1().Deployments(p.namespace).Create(ctx, deployments[i], metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		works := map[string]bool{}
		for len(works) < bindings*clusters {
			select {
			case ev, ok := <-events.ResultChan():
				if !ok {
					b.Fatalf("watch of Works ended after %d Works", len(works))
				}
				if w, isWork := ev.Object.(*v1alpha1.Work); isWork && ev.Type == watch.Added &&
					strings.HasPrefix(w.Annotations[v1alpha1.AnnotationWorkBinding], p.namespace+"/") {
					works[w.Namespace+"/"+w.Name] = true
				}
			case err := <-errs:
				b.Fatal(err)
			case <-time.After(2 * time.Minute):
				b.Fatalf("%d Works after 2 minutes, want %d", len(works), bindings*clusters)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		total += elapsed
		wg.Wait()
		ok, conflicted := settledWrites(b, p.writes)
		addCounts(writes, ok)
		addCounts(conflicts, conflicted)
		events.Stop()
		cancel()
		p.tearDown()
	}
	b.ReportMetric(float64(bindings*b.N)/total.Seconds(), "bindings/s")
	b.ReportMetric(float64(bindings*clusters*b.N)/total.Seconds(), "works/s")
	b.ReportMetric(writes.Total()/float64(bindings*b.N), "writes/binding")
	b.Logf("the controllers' API writes, %d bindings over %d clusters, %d run(s):\n%s", bindings, clusters, b.N,
		apiwrites.Table(writes, conflicts, float64(bindings*b.N), "binding"))
}

// watchWorks watches every Work from now on, resuming after the API
// server ends the watch: it ends a watcher that falls behind the burst of
// creates, which the controllers' informers resume by themselves.
func watchWorks(ctx context.Context, b *testing.B, p *pipeline) watch.Interface {
	b.Helper()
	works := p.env.Flotilla.FlotillaV1alpha1().Works("")
	list, err := works.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
		return works.Watch(ctx, options)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// settledWrites waits until the controllers have written nothing for a
// second (the last status writes follow the last Work's create) and
// returns what they wrote.
func settledWrites(b *testing.B, tally *apiwrites.Tally) (succeeded, conflicts apiwrites.Counts) {
	b.Helper()
	last, quietSince := -1.0, time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		succeeded, conflicts = tally.Counts()
		if n := succeeded.Total() + conflicts.Total(); n != last {
			last, quietSince = n, time.Now()
		} else if time.Since(quietSince) >= time.Second {
			return succeeded, conflicts
		}
		select {
		case <-b.Context().Done():
			return succeeded, conflicts
		case <-time.After(100 * time.Millisecond): // polling a counter: nothing to wait on
		}
	}
	b.Logf("the controllers still wrote a minute after the last Work's create; counting what they wrote so far")
	return succeeded, conflicts
}

// addCounts adds c into into.
func addCounts(into, c apiwrites.Counts) {
	for w, n := range c {
		into[w] += n
	}
}

// tearDown stops the controllers and deletes what the pipeline made, so
// that the next run starts from nothing.
func (p *pipeline) tearDown() {
	p.tb.Helper()
	p.stop()
	ctx := context.Background()
	all := metav1.ListOptions{}
	if err := p.env.Kube.AppsV1().Deployments(p.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		p.tb.Fatal(err)
	}
	fl := p.env.Flotilla.FlotillaV1alpha1()
	if err := fl.PropagationPolicies(p.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		p.tb.Fatal(err)
	}
	if err := fl.ResourceBindings(p.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
		p.tb.Fatal(err)
	}
	p.deleteWorks()
}

const weighted2 = `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: bench}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {bench: "yes"}}}]
  placement:
    clusterAffinity: {clusterNames: [member1, member2, member3]}
    replicaScheduling: {replicaSchedulingType: Divided}`
