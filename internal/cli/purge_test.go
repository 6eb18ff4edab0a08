package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

const purgeRequestsPath = "/apis/flotilla.io/v1alpha1/purgerequests"

// answerPurges plays the hub's PurgeRequest controller: once flotilla has
// created a request, answer writes its status.
func (h *testHub) answerPurges(t *testing.T, answer func(spec v1alpha1.PurgeRequestSpec) v1alpha1.PurgeRequestStatus) {
	t.Helper()
	h.setAnswered(func(req *http.Request, resp *http.Response) {
		if req.Method != http.MethodPost || req.URL.Path != purgeRequestsPath || resp.StatusCode != http.StatusCreated {
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var created v1alpha1.PurgeRequest
		if err := json.Unmarshal(body, &created); err != nil {
			t.Errorf("controller: %v", err)
			return
		}
		created.Status = answer(created.Spec)
		created.Status.FinishTime = ptr(metav1.NewTime(testNow))
		if _, err := h.Flotilla.FlotillaV1alpha1().PurgeRequests().UpdateStatus(context.Background(), &created, metav1.UpdateOptions{}); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
}

func TestPurge(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		answer     v1alpha1.PurgeRequestStatus
		wantSpec   v1alpha1.PurgeRequestSpec
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name:       "purged",
			args:       []string{"binding", "nginx-deployment", "-n", "web", "--cluster", "member-1"},
			answer:     v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultPurged},
			wantSpec:   v1alpha1.PurgeRequestSpec{Binding: v1alpha1.BindingReference{Namespace: "web", Name: "nginx-deployment"}, Cluster: "member-1"},
			wantStdout: "binding/nginx-deployment: eviction task from member-1 ended; its copy there is being removed\n",
		},
		{
			name: "no task, binding of the context's namespace",
			args: []string{"rb", "nginx-deployment", "--cluster", "member-2"},
			answer: v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultFailed, Reason: purgeReasonNoEvictionTask,
				Message: "binding default/nginx-deployment has no eviction task from member-2"},
			wantSpec:   v1alpha1.PurgeRequestSpec{Binding: v1alpha1.BindingReference{Namespace: "default", Name: "nginx-deployment"}, Cluster: "member-2"},
			wantCode:   1,
			wantStderr: "error: rb/nginx-deployment: purge from member-2 failed: binding default/nginx-deployment has no eviction task from member-2 (NoEvictionTask)\n",
		},
		{
			name:       "a cluster binding the hub does not have, without a message",
			args:       []string{"clusterbinding", "gone", "--cluster", "member-1"},
			answer:     v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultFailed, Reason: purgeReasonBindingNotFound},
			wantSpec:   v1alpha1.PurgeRequestSpec{Binding: v1alpha1.BindingReference{Name: "gone"}, Cluster: "member-1"},
			wantCode:   1,
			wantStderr: "error: clusterbinding/gone: purge from member-1 failed: no binding gone (BindingNotFound)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHub(t)
			var got v1alpha1.PurgeRequestSpec
			h.answerPurges(t, func(spec v1alpha1.PurgeRequestSpec) v1alpha1.PurgeRequestStatus {
				got = spec
				return tt.answer
			})
			r := h.run(t, append([]string{"purge"}, tt.args...)...)
			wantExit(t, r, tt.wantCode)
			if r.stdout != tt.wantStdout || r.stderr != tt.wantStderr {
				t.Errorf("stdout %q, stderr %q; want %q and %q", r.stdout, r.stderr, tt.wantStdout, tt.wantStderr)
			}
			if diff := cmp.Diff(tt.wantSpec, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			creates, _ := h.sentMatching(http.MethodPost, purgeRequestsPath)
			if len(creates) != 1 {
				t.Errorf("created %q, want one request", creates)
			}
		})
	}
}

func TestPurgeTimesOut(t *testing.T) {
	h := newHub(t) // no controller: never answered
	r := h.run(t, "purge", "binding", "nginx-deployment", "--cluster", "member-1", "--timeout", "300ms")
	wantExit(t, r, 1)
	if !strings.HasPrefix(r.stderr, `error: the hub did not answer purgerequest "purge-nginx-deployment-member-1-`) ||
		!strings.Contains(r.stderr, "within 300ms") {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestPurgeUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"binding", "x"}, "--cluster is required: the cluster whose eviction task ends"},
		{[]string{"cluster", "x", "--cluster", "c"}, `purge works on a binding or clusterbinding, not "cluster"`},
		{[]string{"binding", "x", "--cluster", "c", "-n", "A"}, `invalid namespace "A"`},
		{[]string{"binding", "x", "--cluster", "c", "--timeout", "-1s"}, "invalid --timeout -1s: must not be negative"},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := h.run(t, append([]string{"purge"}, tt.args...)...)
			wantExit(t, r, 2)
			if !strings.HasPrefix(r.stderr, "error: "+tt.want) {
				t.Errorf("stderr = %q, want it to start with %q", r.stderr, "error: "+tt.want)
			}
			if sent := h.sent(); len(sent) != 0 {
				t.Errorf("sent %q", sent)
			}
		})
	}
}
