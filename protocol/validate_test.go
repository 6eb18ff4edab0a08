package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func validStatus() *ClusterStatus {
	return &ClusterStatus{ObservedAt: testTime, NodesTotal: 3, NodesReady: 3}
}

func validWelcome() *Welcome {
	return &Welcome{ProtocolVersion: 1, HubID: "hub-0", HubTime: testTime, LeaseDurationSeconds: 40, RenewIntervalMillis: 10000}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		m    wireMessage
	}{
		{"hello lets the hub pick the lease", &Hello{ProtocolVersion: 1, ClusterName: "member-1"}},
		{"hello with the longest lease", &Hello{ProtocolVersion: 1, ClusterName: "a.b", LeaseDurationSeconds: 3600}},
		{"hello from a newer agent", &Hello{ProtocolVersion: 9, ClusterName: "member-1"}},
		{"lease renew with seq 0", &LeaseRenew{AgentTime: testTime}},
		{"status without resources", validStatus()},
		{"status with empty cluster", &ClusterStatus{ObservedAt: testTime}},
		{"status with extended resources", &ClusterStatus{ObservedAt: testTime, Allocatable: map[string]string{
			"nvidia.com/gpu": "8", "hugepages-2Mi": "1Gi", "ephemeral-storage": "100G", "cpu": "500m"}}},
		{"goaway without reason", &GoAway{}},
		{"error with a code from the future", &Error{Code: "RateLimited"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	long := strings.Repeat("x", maxLongString+1)
	short := strings.Repeat("x", maxShortString+1)
	tooMany := map[string]string{}
	for i := range maxResources + 1 {
		tooMany["example.com/r"+strings.Repeat("x", i)] = "1"
	}
	withStatus := func(edit func(*ClusterStatus)) *ClusterStatus {
		s := validStatus()
		edit(s)
		return s
	}
	withWelcome := func(edit func(*Welcome)) *Welcome {
		w := validWelcome()
		edit(w)
		return w
	}
	withJoin := func(edit func(*JoinRequest)) *JoinRequest {
		j := validJoinRequest()
		edit(j)
		return j
	}
	manyLabels := map[string]string{}
	for i := range maxJoinLabels + 1 {
		manyLabels["l"+strings.Repeat("x", i)] = "v"
	}
	tests := []struct {
		name     string
		m        wireMessage
		wantText string
	}{
		{"join without token", withJoin(func(j *JoinRequest) { j.BootstrapToken = "" }), "bootstrapToken is required"},
		{"join token too long", withJoin(func(j *JoinRequest) { j.BootstrapToken = strings.Repeat("a", 24) }), "bootstrapToken is 24 bytes"},
		{"join without csr", withJoin(func(j *JoinRequest) { j.CSR = nil }), "csr is required"},
		{"join csr too large", withJoin(func(j *JoinRequest) { j.CSR = make([]byte, maxCSRBytes+1) }), "csr is 16385 bytes"},
		{"join bad cluster", withJoin(func(j *JoinRequest) { j.ClusterName = "Edge_1" }), `clusterName "Edge_1"`},
		{"join bad label key", withJoin(func(j *JoinRequest) { j.Labels = map[string]string{"bad key": "v"} }), `labels: key "bad key"`},
		{"join bad label value", withJoin(func(j *JoinRequest) { j.Labels = map[string]string{"k": "a b"} }), `labels[k]: value "a b"`},
		{"join too many labels", withJoin(func(j *JoinRequest) { j.Labels = manyLabels }), "labels has 65 entries"},
		{"join zone too long", withJoin(func(j *JoinRequest) { j.Zone = short }), "zone is 1025 bytes"},
		{"join response without certificate", &JoinResponse{CACertificate: []byte("ca")}, "certificate is required"},
		{"join response pending with certificate", &JoinResponse{Pending: true, Certificate: []byte("c"), CACertificate: []byte("ca")}, "certificate: must be empty while pending"},
		{"join response without CA", &JoinResponse{Certificate: []byte("c")}, "caCertificate is required"},
		{"renew without csr", &CertificateRenewRequest{}, "csr is required"},
		{"renew csr too large", &CertificateRenewRequest{CSR: make([]byte, maxCSRBytes+1)}, "csr is 16385 bytes"},
		{"renew response without certificate", &CertificateRenewResponse{CACertificate: []byte("ca")}, "certificate is required"},
		{"renew response certificate too large", &CertificateRenewResponse{Certificate: make([]byte, maxCertBytes+1), CACertificate: []byte("ca")}, "certificate is 32769 bytes"},
		{"renew response without CA", &CertificateRenewResponse{Certificate: []byte("c")}, "caCertificate is required"},
		{"hello version 0", &Hello{ClusterName: "member-1"}, "protocolVersion 0 must be positive"},
		{"hello negative version", &Hello{ProtocolVersion: -1, ClusterName: "member-1"}, "protocolVersion"},
		{"hello without cluster", &Hello{ProtocolVersion: 1}, "clusterName is required"},
		{"hello cluster not DNS", &Hello{ProtocolVersion: 1, ClusterName: "Member_1"}, "clusterName \"Member_1\""},
		{"hello cluster too long", &Hello{ProtocolVersion: 1, ClusterName: strings.Repeat("a", 254)}, "clusterName"},
		{"hello agent version too long", &Hello{ProtocolVersion: 1, ClusterName: "m", AgentVersion: short}, "agentVersion"},
		{"hello negative lease", &Hello{ProtocolVersion: 1, ClusterName: "m", LeaseDurationSeconds: -1}, "leaseDurationSeconds -1"},
		{"hello lease over an hour", &Hello{ProtocolVersion: 1, ClusterName: "m", LeaseDurationSeconds: 3601}, "leaseDurationSeconds 3601"},
		{"hello reports every problem", &Hello{}, "protocolVersion 0 must be positive; clusterName is required"},
		{"welcome version 0", withWelcome(func(w *Welcome) { w.ProtocolVersion = 0 }), "protocolVersion"},
		{"welcome without hub", withWelcome(func(w *Welcome) { w.HubID = "" }), "hubID is required"},
		{"welcome hub too long", withWelcome(func(w *Welcome) { w.HubID = short }), "hubID is 1025 bytes"},
		{"welcome without time", withWelcome(func(w *Welcome) { w.HubTime = time.Time{} }), "hubTime is required"},
		{"welcome without lease", withWelcome(func(w *Welcome) { w.LeaseDurationSeconds = 0 }), "leaseDurationSeconds 0"},
		{"welcome without renew", withWelcome(func(w *Welcome) { w.RenewIntervalMillis = 0 }), "renewIntervalMillis 0"},
		{"welcome renew as long as lease", withWelcome(func(w *Welcome) { w.RenewIntervalMillis = 40000 }), "renewIntervalMillis 40000 must be in [1, 39999]"},
		{"lease renew without time", &LeaseRenew{Seq: 1}, "agentTime is required"},
		{"lease ack without time", &LeaseAck{Seq: 1}, "hubTime is required"},
		{"status without time", withStatus(func(s *ClusterStatus) { s.ObservedAt = time.Time{} }), "observedAt is required"},
		{"status version too long", withStatus(func(s *ClusterStatus) { s.KubernetesVersion = short }), "kubernetesVersion"},
		{"status health message too long", withStatus(func(s *ClusterStatus) { s.HealthMessage = long }), "healthMessage is 4097 bytes"},
		{"status negative nodes", withStatus(func(s *ClusterStatus) { s.NodesTotal = -1; s.NodesReady = 0 }), "nodesTotal -1"},
		{"status negative ready", withStatus(func(s *ClusterStatus) { s.NodesReady = -1 }), "nodesReady -1"},
		{"status more ready than total", withStatus(func(s *ClusterStatus) { s.NodesReady = 4 }), "nodesReady 4 must be in [0, 3]"},
		{"status bad quantity", withStatus(func(s *ClusterStatus) { s.Allocatable = map[string]string{"cpu": "lots"} }), "allocatable[cpu]: quantity \"lots\""},
		{"status empty quantity", withStatus(func(s *ClusterStatus) { s.Allocated = map[string]string{"cpu": ""} }), "allocated[cpu]"},
		{"status negative quantity", withStatus(func(s *ClusterStatus) { s.Allocated = map[string]string{"memory": "-1Gi"} }), "is negative"},
		{"status quantity too long", withStatus(func(s *ClusterStatus) { s.Allocated = map[string]string{"cpu": strings.Repeat("1", 65)} }), "quantity is 65 bytes"},
		{"status bad resource name", withStatus(func(s *ClusterStatus) { s.Allocatable = map[string]string{"not a name": "1"} }), "resource name \"not a name\""},
		{"status empty resource name", withStatus(func(s *ClusterStatus) { s.Allocatable = map[string]string{"": "1"} }), "resource name \"\""},
		{"status too many resources", withStatus(func(s *ClusterStatus) { s.Allocatable = tooMany }), "allocatable has 257 entries"},
		{"goaway reason too long", &GoAway{Reason: long}, "reason is 4097 bytes"},
		{"error without code", &Error{Message: "x"}, "code is required"},
		{"error code too long", &Error{Code: short}, "code is 1025 bytes"},
		{"error message too long", &Error{Code: CodeBadMessage, Message: long}, "message is 4097 bytes"},
		{"status served API without kind", withStatus(func(s *ClusterStatus) {
			s.ServedAPIs = &ServedAPIs{Items: []APIEnablement{{GroupVersion: "v1", Resources: []APIResource{{Name: "pods"}}}}}
		}), "servedAPIs.items[0].resources[0]"},
		{"status served API without group version", withStatus(func(s *ClusterStatus) {
			s.ServedAPIs = &ServedAPIs{Items: []APIEnablement{{}}}
		}), "servedAPIs.items[0].groupVersion"},
		{"inventory entry without generation", &WorkInventory{Works: []WorkRef{{Name: "w"}}}, "works[0].generation 0 must be positive"},
		{"inventory entry bad name", &WorkInventory{Works: []WorkRef{{Name: "W_1", Generation: 1}}}, "works[0].name"},
		{"upsert without name", &WorkUpsert{Generation: 1}, "name is required"},
		{"upsert without generation", &WorkUpsert{Name: "w"}, "generation 0 must be positive"},
		{"upsert manifest not an object", &WorkUpsert{Name: "w", Generation: 1, Manifests: []json.RawMessage{json.RawMessage(`[1]`)}}, "manifests[0] must be a JSON object"},
		{"upsert negative stopAfterSeconds", &WorkUpsert{Name: "w", Generation: 1, StopAfterSeconds: -1}, "stopAfterSeconds -1 must be in [0, 2592000]"},
		{"upsert stopAfterSeconds over 30 days", &WorkUpsert{Name: "w", Generation: 1, StopAfterSeconds: MaxStopAfterSeconds + 1}, "stopAfterSeconds 2592001 must be in [0, 2592000]"},
		{"upsert too many manifests", &WorkUpsert{Name: "w", Generation: 1, Manifests: make([]json.RawMessage, maxManifests+1)}, "len(manifests) 1025"},
		{"delete without name", &WorkDelete{}, "name is required"},
		{"applied bad health", &WorkApplied{Name: "w", Generation: 1, Manifests: []ManifestResult{{Name: "x", Health: "Fine"}}}, `manifests[0].health "Fine"`},
		{"applied negative ordinal", &WorkApplied{Name: "w", Generation: 1, Manifests: []ManifestResult{{Ordinal: -1, Name: "x", Health: HealthHealthy}}}, "manifests[0].ordinal -1"},
		{"applied with a reason", &WorkApplied{Name: "w", Generation: 1, Applied: true, Reason: ReasonRefusedByMemberPolicy}, `reason "RefusedByMemberPolicy"`},
		{"unknown reason", &WorkApplied{Name: "w", Generation: 1, Reason: "Whatever"}, `reason "Whatever"`},
		{"status with non-object status", &WorkStatus{Name: "w", Generation: 1, Manifests: []ManifestResult{{Name: "x", Health: HealthHealthy, Status: json.RawMessage(`"ready"`)}}}, "manifests[0].status must be a JSON object"},
		{"upsert too many state paths", &WorkUpsert{Name: "w", Generation: 1, StatePaths: make([]string, MaxStatePaths+1)}, "len(statePaths) 33 must be in [0, 32]"},
		{"upsert empty state path", &WorkUpsert{Name: "w", Generation: 1, StatePaths: []string{"{.a}", ""}}, "statePaths[1] is required"},
		{"upsert long state path", &WorkUpsert{Name: "w", Generation: 1, StatePaths: []string{strings.Repeat("a", MaxStatePathBytes+1)}}, "statePaths[0] is 1025 bytes long, limit 1024"},
		{"status with too many state values", &WorkStatus{Name: "w", Generation: 1, Manifests: []ManifestResult{{Name: "x", Health: HealthHealthy,
			StateValues: manyValues(MaxStatePaths + 1)}}}, "manifests[0].stateValues has 33 entries, limit 32"},
		{"status with a long state value", &WorkStatus{Name: "w", Generation: 1, Manifests: []ManifestResult{{Name: "x", Health: HealthHealthy,
			StateValues: map[string]string{"{.a}": "ok", "{.b}": strings.Repeat("v", MaxStateValueBytes+1)}}}}, `manifests[0].stateValues["{.b}"] is 257 bytes long, limit 256`},
		{"applied with a long state template", &WorkApplied{Name: "w", Generation: 1, Manifests: []ManifestResult{{Name: "x", Health: HealthHealthy,
			StateValues: map[string]string{strings.Repeat("t", MaxStatePathBytes+1): "v"}}}}, "is 1025 bytes long, limit 1024"},
		{"applied with an empty state template", &WorkApplied{Name: "w", Generation: 1, Manifests: []ManifestResult{{Name: "x", Health: HealthHealthy,
			StateValues: map[string]string{"": "v"}}}}, "manifests[0].stateValues has an empty template"},
		{"deleted without name", &WorkDeleted{}, "name is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkInvalid(t, "Validate()", tt.m.Validate(), tt.wantText)
			// The same message arriving from a peer is rejected by the reader.
			payload, err := json.Marshal(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewReader(bytes.NewReader(rawFrame(tt.m.Type(), string(payload))), 0).ReadMessage()
			checkInvalid(t, "ReadMessage()", err, tt.wantText)
		})
	}
}

// manyValues are n state values.
func manyValues(n int) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		out[fmt.Sprintf("{.f%d}", i)] = "v"
	}
	return out
}

func checkInvalid(t *testing.T, what string, err error, wantText string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("%s = %v, want ErrInvalidMessage", what, err)
	}
	if !strings.Contains(err.Error(), wantText) {
		t.Errorf("%s = %q, want it to contain %q", what, err, wantText)
	}
}

// The fencing fields are optional on the wire: absent when unset, so an
// older peer sees the messages it knows, and read back as sent.
func TestFencingFieldsOnTheWire(t *testing.T) {
	tests := []struct {
		m    Message
		want string
	}{
		{&WorkUpsert{Name: "w", Generation: 1}, `{"name":"w","generation":1,"binding":"","manifests":null}`},
		{&WorkUpsert{Name: "w", Generation: 1, StopAfterSeconds: 30}, `{"name":"w","generation":1,"binding":"","manifests":null,"stopAfterSeconds":30}`},
		{&WorkUpsert{Name: "w", Generation: 1, StatePaths: []string{"{.jobStatus.jobId}"}},
			`{"name":"w","generation":1,"binding":"","manifests":null,"statePaths":["{.jobStatus.jobId}"]}`},
		{&WorkStatus{Name: "w", Generation: 1, Manifests: []ManifestResult{{Name: "x", Health: HealthHealthy, StateValues: map[string]string{"{.a}": "1"}}}},
			`{"name":"w","generation":1,"manifests":[{"ordinal":0,"group":"","version":"","kind":"","name":"x","health":"Healthy","stateValues":{"{.a}":"1"}}]}`},
		{&WorkInventory{Works: []WorkRef{{Name: "w", Generation: 1}}}, `{"works":[{"name":"w","generation":1}]}`},
		{&WorkInventory{Works: []WorkRef{{Name: "w", Generation: 1, Fenced: true}}}, `{"works":[{"name":"w","generation":1,"fenced":true}]}`},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := WriteMessage(&buf, tt.m); err != nil {
			t.Fatal(err)
		}
		if got := string(buf.Bytes()[lengthSize+1:]); got != tt.want {
			t.Errorf("%v encodes as %s, want %s", tt.m.Type(), got, tt.want)
		}
		back, err := NewReader(&buf, MaxWorkFrameSize).ReadMessage()
		if err != nil {
			t.Fatalf("read back %s: %v", tt.want, err)
		}
		if diff := cmp.Diff(tt.m, back); diff != "" {
			t.Errorf("round trip of %s (-sent +received):\n%s", tt.want, diff)
		}
	}
}
