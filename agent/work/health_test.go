package work

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/protocol"
)

func TestHealth(t *testing.T) {
	for _, tc := range []struct {
		name, obj   string
		wantHealth  string
		wantMessage string // "" means none; "*" means any non-empty message
	}{
		{
			name:       "ConfigMap is always current",
			obj:        `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
			wantHealth: protocol.HealthHealthy,
		},
		{
			name: "available Deployment",
			obj: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","generation":2},
				"spec":{"replicas":3},
				"status":{"observedGeneration":2,"replicas":3,"readyReplicas":3,"availableReplicas":3,"updatedReplicas":3,
				"conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"}]}}`,
			wantHealth: protocol.HealthHealthy,
		},
		{
			name: "Deployment rolling out",
			obj: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","generation":2},
				"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"readyReplicas":1,"updatedReplicas":3}}`,
			wantHealth: protocol.HealthUnhealthy, wantMessage: "*",
		},
		{
			name: "Deployment past its progress deadline",
			obj: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","generation":1},
				"spec":{"replicas":1},"status":{"observedGeneration":1,"replicas":1,
				"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"too slow"}]}}`,
			wantHealth: protocol.HealthUnhealthy, wantMessage: "*",
		},
		{
			name: "Deployment being deleted",
			obj: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","deletionTimestamp":"2030-01-01T00:00:00Z"},
				"spec":{"replicas":1}}`,
			wantHealth: protocol.HealthUnknown, wantMessage: "*",
		},
		{
			name: "completed Job",
			obj: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},
				"status":{"startTime":"2030-01-01T00:00:00Z","succeeded":1,"conditions":[{"type":"Complete","status":"True"}]}}`,
			wantHealth: protocol.HealthHealthy, wantMessage: "complete",
		},
		{
			name: "failed Job",
			obj: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},
				"status":{"startTime":"2030-01-01T00:00:00Z","failed":6,
				"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded","message":"Job has reached the specified backoff limit"}]}}`,
			wantHealth:  protocol.HealthUnhealthy,
			wantMessage: "failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
		},
		{
			name: "running Job is as kstatus says",
			obj: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},
				"status":{"startTime":"2030-01-01T00:00:00Z","active":1}}`,
			wantHealth: protocol.HealthHealthy,
		},
		{
			name:       "Job not started yet",
			obj:        `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"status":{}}`,
			wantHealth: protocol.HealthUnhealthy, wantMessage: "*",
		},
		{
			name: "custom resource with a False Ready condition",
			obj: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},
				"status":{"conditions":[{"type":"Ready","status":"False","message":"warming up"}]}}`,
			wantHealth: protocol.HealthUnhealthy, wantMessage: "*",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, msg := health(object(t, tc.obj))
			if h != tc.wantHealth {
				t.Errorf("health = %s (%q), want %s", h, msg, tc.wantHealth)
			}
			switch {
			case tc.wantMessage == "*" && msg == "":
				t.Errorf("no message, want one saying why")
			case tc.wantMessage != "*" && msg != tc.wantMessage:
				t.Errorf("message = %q, want %q", msg, tc.wantMessage)
			}
		})
	}
}

func TestKeyStatus(t *testing.T) {
	for _, tc := range []struct {
		name, obj string
		want      string // "" means no status
	}{
		{
			name: "Deployment",
			obj: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
				"status":{"observedGeneration":4,"replicas":3,"readyReplicas":2,"availableReplicas":2,"updatedReplicas":3,"conditions":[]}}`,
			want: `{"availableReplicas":2,"readyReplicas":2,"replicas":3,"updatedReplicas":3}`,
		},
		{
			name: "StatefulSet with some fields",
			obj:  `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"s"},"status":{"replicas":1,"currentRevision":"x","collisionCount":2}}`,
			want: `{"currentRevision":"x","replicas":1}`,
		},
		{
			name: "StatefulSet revisions",
			obj: `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db"},
				"status":{"replicas":1,"readyReplicas":1,"currentRevision":"db-7c9d6b5f8","updateRevision":"db-7c9d6b5f8","collisionCount":0}}`,
			want: `{"currentRevision":"db-7c9d6b5f8","readyReplicas":1,"replicas":1,"updateRevision":"db-7c9d6b5f8"}`,
		},
		{
			name: "DaemonSet",
			obj: `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"ds"},
				"status":{"desiredNumberScheduled":3,"numberReady":3,"numberAvailable":2,"currentNumberScheduled":3}}`,
			want: `{"desiredNumberScheduled":3,"numberAvailable":2,"numberReady":3}`,
		},
		{
			name: "Job",
			obj:  `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"status":{"active":1,"succeeded":2,"failed":0}}`,
			want: `{"active":1,"failed":0,"succeeded":2}`,
		},
		{
			name: "Deployment without status",
			obj:  `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`,
		},
		{
			name: "other kinds report none",
			obj:  `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"status":{"loadBalancer":{}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, string(keyStatus(object(t, tc.obj)))); diff != "" {
				t.Errorf("key status (-want +got):\n%s", diff)
			}
		})
	}
}
