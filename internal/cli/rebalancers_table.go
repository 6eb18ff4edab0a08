package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rebalancersTable decodes the hub's answer (a list, or one when single)
// into the "get workloadrebalancers" table.
func rebalancersTable(raw []byte, o tableOptions) (*table, error) {
	items, err := decodeItems[appsv1alpha1.WorkloadRebalancer](raw, o.single, appsv1alpha1.KindWorkloadRebalancer)
	if err != nil {
		return nil, err
	}
	t := &table{header: []string{"NAME", "WORKLOADS", "SUCCESSFUL", "FAILED", "FINISHED", "TTL", "AGE"}}
	for i := range items {
		rb := &items[i]
		successful, failed := resultCounts(rb)
		t.add(rb.Name, strconv.Itoa(len(rb.Spec.Workloads)), strconv.Itoa(successful), strconv.Itoa(failed),
			finishedText(rb, o.now), seconds(rb.Spec.TTLSecondsAfterFinished), age(o.now, rb.CreationTimestamp.Time))
	}
	return t, nil
}

func resultCounts(rb *appsv1alpha1.WorkloadRebalancer) (successful, failed int) {
	for _, w := range rb.Status.ObservedWorkloads {
		switch w.Result {
		case appsv1alpha1.RebalanceSuccessful:
			successful++
		case appsv1alpha1.RebalanceFailed:
			failed++
		}
	}
	return successful, failed
}

// finishedText is how long ago the rebalancer finished, or "-" while it
// has not.
func finishedText(rb *appsv1alpha1.WorkloadRebalancer, now time.Time) string {
	if !rb.Finished() {
		return none
	}
	return age(now, rb.Status.FinishTime.Time) + " ago"
}

// describeRebalancerNamed prints one WorkloadRebalancer with its events.
func describeRebalancerNamed(ctx context.Context, inv *invocation, c *hubClients, name string) error {
	rb, err := c.flotilla.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	events, err := c.objectEvents(ctx, appsv1alpha1.KindWorkloadRebalancer, "", name)
	if err != nil {
		return err
	}
	return writeRebalancerDescription(inv.Stdout, rb, events, inv.Now())
}

// writeRebalancerDescription prints a WorkloadRebalancer the way describe
// shows it: its TTL, how far the hub got, the result of every workload.
func writeRebalancerDescription(w io.Writer, rb *appsv1alpha1.WorkloadRebalancer, events []corev1.Event, now time.Time) error {
	d := &describeWriter{now: now}
	d.field(0, "Name:", rb.Name)
	d.values("Labels:", labelPairs(rb.Labels))
	d.field(0, "Created:", d.when(&rb.CreationTimestamp))
	ttl := "- (kept until deleted)"
	if s := rb.Spec.TTLSecondsAfterFinished; s != nil {
		ttl = seconds(s)
		if rb.Finished() {
			at := rb.Status.FinishTime.Add(time.Duration(*s) * time.Second)
			ttl += fmt.Sprintf(" (deleted at %s)", at.UTC().Format(time.RFC3339))
		}
	}
	d.field(0, "TTL After Finished:", ttl)
	d.field(0, "Generation:", fmt.Sprintf("%d (observed %d)", rb.Generation, rb.Status.ObservedGeneration))
	state := "in progress"
	if rb.Finished() {
		state = d.when(rb.Status.FinishTime)
	}
	d.field(0, "Finished:", state)
	d.heading("Workloads:")
	t := rebalanceResultTable(rb)
	observed := map[appsv1alpha1.ObjectReference]bool{}
	for _, o := range rb.Status.ObservedWorkloads {
		observed[o.Workload] = true
	}
	for _, wl := range rb.Spec.Workloads {
		if !observed[wl] { // not acted on yet
			t.add(orNone(wl.Namespace), workloadText(wl), none, none)
		}
	}
	d.table(t)
	d.events(events)
	return d.flush(w)
}
