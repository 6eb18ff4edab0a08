package purge

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TestPurge: a request ends the binding's task from its cluster (and only
// that one), or fails saying what was missing.
func TestPurge(t *testing.T) {
	f := newFixture(t)
	f.binding(f.Namespace, "nginx", task("member-1", v1alpha1.PurgeModeNever), task("member-3", v1alpha1.PurgeModeGracefully))
	f.binding("", "reader", task("member-1", ""))
	f.start()
	tests := []struct {
		name, request, namespace, binding, cluster string
		want                                       v1alpha1.PurgeRequestStatus
		wantTasks                                  []string // of the binding after
		wantEvents                                 []string
	}{
		{
			name: "a Never task", request: "keep", namespace: f.Namespace, binding: "nginx-deployment", cluster: "member-1",
			want: v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultPurged,
				Message: "eviction task of ResourceBinding " + f.Namespace + "/nginx-deployment from member-1 ended (was TaintUntolerated, purge mode Never); its copy there is removed"},
			wantTasks: []string{"member-3"},
			wantEvents: []string{
				"Normal EvictionTaskEnded ResourceBinding nginx-deployment: eviction from member-1 ended by hand (was TaintUntolerated, purge mode Never); its copy there is removed",
				"Normal EvictionTaskEnded Deployment nginx: eviction from member-1 ended by hand (was TaintUntolerated, purge mode Never); its copy there is removed",
				"Normal Purged PurgeRequest keep: eviction task of ResourceBinding " + f.Namespace + "/nginx-deployment from member-1 ended (was TaintUntolerated, purge mode Never); its copy there is removed",
			},
		},
		{
			name: "the same again: no task", request: "again", namespace: f.Namespace, binding: "nginx-deployment", cluster: "member-1",
			want: v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultFailed, Reason: ReasonNoEvictionTask,
				Message: "ResourceBinding " + f.Namespace + "/nginx-deployment has no eviction task from cluster member-1"},
			wantTasks:  []string{"member-3"},
			wantEvents: []string{"Warning Failed PurgeRequest again: ResourceBinding " + f.Namespace + "/nginx-deployment has no eviction task from cluster member-1"},
		},
		{
			name: "no such binding", request: "missing", namespace: f.Namespace, binding: "api-deployment", cluster: "member-1",
			want: v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultFailed, Reason: ReasonBindingNotFound,
				Message: "ResourceBinding " + f.Namespace + "/api-deployment not found"},
			wantEvents: []string{"Warning Failed PurgeRequest missing: ResourceBinding " + f.Namespace + "/api-deployment not found"},
		},
		{
			name: "a cluster binding", request: "cluster-scoped", binding: "reader-clusterrole", cluster: "member-1",
			want: v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultPurged,
				Message: "eviction task of ClusterResourceBinding reader-clusterrole from member-1 ended (was TaintUntolerated, purge mode Gracefully); its copy there is removed"},
			wantTasks: []string{},
			wantEvents: []string{
				"Normal EvictionTaskEnded ClusterResourceBinding reader-clusterrole: eviction from member-1 ended by hand (was TaintUntolerated, purge mode Gracefully); its copy there is removed",
				"Normal EvictionTaskEnded ClusterRole reader: eviction from member-1 ended by hand (was TaintUntolerated, purge mode Gracefully); its copy there is removed",
				"Normal Purged PurgeRequest cluster-scoped: eviction task of ClusterResourceBinding reader-clusterrole from member-1 ended (was TaintUntolerated, purge mode Gracefully); its copy there is removed",
			},
		},
		{
			name: "a cluster binding that does not exist", request: "no-cluster-binding", binding: "writer-clusterrole", cluster: "member-1",
			want: v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultFailed, Reason: ReasonBindingNotFound,
				Message: "ClusterResourceBinding writer-clusterrole not found"},
			wantEvents: []string{"Warning Failed PurgeRequest no-cluster-binding: ClusterResourceBinding writer-clusterrole not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := len(f.Events.List())
			f.request(tt.request, tt.namespace, tt.binding, tt.cluster, nil)
			got := f.answered(tt.request)
			tt.want.FinishTime = &metav1.Time{Time: f.T0}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if tt.wantTasks != nil {
				if diff := cmp.Diff(tt.wantTasks, f.tasks(tt.namespace, tt.binding), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("tasks left (-want +got):\n%s", diff)
				}
			}
			f.AwaitEvents(events, tt.wantEvents...)
		})
	}
}

// TestAnswerKeptWhenStatusWriteFails: the task ended but the answer could
// not be stored; the retry stores the same answer instead of finding no
// task.
func TestAnswerKeptWhenStatusWriteFails(t *testing.T) {
	f := newFixture(t)
	f.binding(f.Namespace, "nginx", task("member-1", v1alpha1.PurgeModeNever))
	f.failStatus <- struct{}{}
	f.start()
	f.request("purge", f.Namespace, "nginx-deployment", "member-1", nil)
	if got := f.answered("purge"); got.Result != v1alpha1.PurgeResultPurged {
		t.Errorf("answer %+v, want Purged", got)
	}
	if len(f.failStatus) != 0 {
		t.Error("the status write was not made to fail")
	}
}

// TestDeletedAfterTTL: 300 s after it finished by default, the TTL's
// latest value otherwise.
func TestDeletedAfterTTL(t *testing.T) {
	f := newFixture(t)
	f.binding(f.Namespace, "nginx", task("member-1", v1alpha1.PurgeModeNever), task("member-2", v1alpha1.PurgeModeNever))
	f.start()

	f.request("default-ttl", f.Namespace, "nginx-deployment", "member-1", nil)
	deadline := f.answered("default-ttl").FinishTime.Add(DefaultTTL)
	f.AwaitWake(0, "default-ttl", deadline)
	f.clk.Step(DefaultTTL - time.Second)
	// A second before: the controller, looking again, still waits.
	since := f.WakeCount()
	f.edit("default-ttl", func(*v1alpha1.PurgeRequest) {})
	f.AwaitWake(since, "default-ttl", deadline)
	if f.get("default-ttl") == nil {
		t.Fatal("deleted before its TTL")
	}
	f.clk.Step(time.Second)
	f.awaitGone("default-ttl")

	// A TTL shortened after the answer counts.
	f.request("shortened", f.Namespace, "nginx-deployment", "member-2", nil)
	finished := f.answered("shortened").FinishTime.Time
	since = f.WakeCount()
	f.edit("shortened", func(pr *v1alpha1.PurgeRequest) { pr.Spec.TTLSecondsAfterFinished = ptr.To[int32](10) })
	f.AwaitWake(since, "shortened", finished.Add(10*time.Second))
	f.clk.Step(10 * time.Second)
	f.awaitGone("shortened")

	// Zero: deleted once answered.
	f.request("zero", f.Namespace, "nginx-deployment", "member-9", ptr.To[int32](0))
	f.awaitGone("zero")
}
