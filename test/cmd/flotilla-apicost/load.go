package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-cmp/cmp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
)

// kindOps are the writes measured for one kind, on object i of a run.
type kindOps struct {
	name   string
	create func(ctx context.Context, i int) error
	// update and status GET from the watch cache (resourceVersion=0), as
	// a controller's lister would, and PUT; conflicts are retried.
	update, status func(ctx context.Context, i, n int) (conflicts int, err error)
	// check says whether object i came back whole after the writes.
	check func(ctx context.Context, i int) error
}

var fromCache = metav1.GetOptions{ResourceVersion: "0"}

func objectName(round, i int) string { return fmt.Sprintf("bench-%d-%05d", round, i) }

func bindingOps(c versioned.Interface, ns string, round int) kindOps {
	api := c.FlotillaV1alpha1().ResourceBindings(ns)
	return kindOps{
		name: "ResourceBinding",
		create: func(ctx context.Context, i int) error {
			_, err := api.Create(ctx, binding(ns, objectName(round, i)), metav1.CreateOptions{})
			return err
		},
		update: func(ctx context.Context, i, n int) (int, error) {
			return retry(func() error {
				b, err := api.Get(ctx, objectName(round, i), fromCache)
				if err == nil {
					b.Spec.Replicas = int32(6 + n%2)
					_, err = api.Update(ctx, b, metav1.UpdateOptions{})
				}
				return err
			})
		},
		status: func(ctx context.Context, i, n int) (int, error) {
			return retry(func() error {
				b, err := api.Get(ctx, objectName(round, i), fromCache)
				if err == nil {
					bindingStatus(b, n)
					_, err = api.UpdateStatus(ctx, b, metav1.UpdateOptions{})
				}
				return err
			})
		},
		check: func(ctx context.Context, i int) error {
			b, err := api.Get(ctx, objectName(round, i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			want := binding(ns, objectName(round, i))
			want.Spec.Replicas = 7
			if diff := cmp.Diff(want.Spec, b.Spec); diff != "" {
				return fmt.Errorf("spec after the writes (-want +got):\n%s", diff)
			}
			if len(b.Status.AggregatedStatus) != len(clusterNames) || b.Status.AggregatedStatus[0].Status == nil ||
				len(b.Status.AggregatedStatus[0].Status.Raw) == 0 || b.Generation != 2 || len(b.ManagedFields) == 0 {
				return fmt.Errorf("binding after the writes: generation %d, %d managedFields entries, status %+v", b.Generation, len(b.ManagedFields), b.Status)
			}
			return nil
		},
	}
}

func configMapOps(c kubernetes.Interface, ns string, round int) kindOps {
	api := c.CoreV1().ConfigMaps(ns)
	return kindOps{
		name: "ConfigMap",
		create: func(ctx context.Context, i int) error {
			_, err := api.Create(ctx, configMap(ns, objectName(round, i)), metav1.CreateOptions{})
			return err
		},
		update: func(ctx context.Context, i, n int) (int, error) {
			return retry(func() error {
				cm, err := api.Get(ctx, objectName(round, i), fromCache)
				if err == nil {
					cm.Data["key-00"] = fmt.Sprintf("%0100d", n)
					_, err = api.Update(ctx, cm, metav1.UpdateOptions{})
				}
				return err
			})
		},
	}
}

// retry runs write until it does not conflict, and counts the conflicts.
func retry(write func() error) (int, error) {
	for conflicts := 0; ; conflicts++ {
		err := write()
		if !apierrors.IsConflict(err) || conflicts == 100 {
			return conflicts, err
		}
	}
}

// phase is one measured batch of writes.
type phase struct {
	op                 string
	writes, conflicts  int
	wall               time.Duration
	serverCPU, etcdCPU float64 // seconds, the server's idle CPU subtracted
}

// runPhase makes n writes with op (an index and a round number) from
// clients goroutines and measures the CPU the server and etcd spent.
func runPhase(ctx context.Context, name string, cpu *cpuMeter, n, clients int, op func(ctx context.Context, i int) (int, error)) (phase, error) {
	var next, conflicts atomic.Int64
	var firstErr error
	var once sync.Once
	before, err := cpu.read()
	if err != nil {
		return phase{}, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				c, err := op(ctx, i)
				conflicts.Add(int64(c))
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("%s %d: %w", name, i, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	after, err := cpu.read()
	if err != nil {
		return phase{}, err
	}
	p := phase{op: name, writes: n, conflicts: int(conflicts.Load()), wall: wall,
		serverCPU: after.server - before.server - cpu.idleServer*wall.Seconds(),
		etcdCPU:   after.etcd - before.etcd - cpu.idleEtcd*wall.Seconds()}
	return p, firstErr
}
