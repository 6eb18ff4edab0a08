package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Work messages travel on a StreamWork stream that the agent opens after
// Welcome. The agent first sends WorkInventory; the hub answers with the
// WorkUpserts and WorkDeletes that bring the agent in step, then sends
// changes as they happen. The agent answers every upsert with WorkApplied
// and every delete with WorkDeleted, and sends WorkStatus when the health of
// what it applied changes.

// MaxWorkFrameSize is the frame limit of what the hub sends on a work
// stream: a Work carries whole manifests (a ConfigMap alone may be 1 MiB).
// What the agent sends back is bounded per kind (AgentMessageLimit).
const MaxWorkFrameSize = 16 << 20

// Bounds for work messages.
const (
	maxManifests = 1 << 10
	maxInventory = 1 << 20
	// maxWorkNameBytes keeps Work names usable as label values.
	maxWorkNameBytes = 63
)

// WorkRef names a Work and the generation the agent holds of it.
type WorkRef struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// Fenced says the agent stopped the Work's workloads while it was cut
	// off from the hub (see WorkUpsert.StopAfterSeconds). They stay stopped
	// until the hub sends the Work again, which it does for every fenced
	// Work it still wants, whatever the generation.
	Fenced bool `json:"fenced,omitempty"`
}

// WorkInventory is the agent's first message on a work stream: every Work it
// has applied and not deleted, with the generation it applied.
type WorkInventory struct {
	Works []WorkRef `json:"works"`
}

// WorkUpsert tells the agent to apply a Work's manifests; objects of an
// older generation that are no longer in Manifests are pruned.
type WorkUpsert struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// Binding names the binding the Work renders ("namespace/name" or
	// "name"), for labels and logs.
	Binding   string            `json:"binding"`
	Manifests []json.RawMessage `json:"manifests"`
	// StopAfterSeconds, when positive, fences the Work: an agent that has
	// had no lease renewal acknowledged for this long scales the Work's
	// workloads to zero (and suspends its Jobs), and keeps them so until
	// the hub sends the Work again.
	StopAfterSeconds int32 `json:"stopAfterSeconds,omitempty"`
	// StatePaths are kubectl JSONPath templates the agent evaluates on the
	// status of the first manifest's object, reporting the values in
	// ManifestResult.StateValues: what failover's statePreservation rules
	// read, for any kind. At most MaxStatePaths of at most
	// MaxStatePathBytes each. Older agents ignore them.
	StatePaths []string `json:"statePaths,omitempty"`
}

// Bounds of WorkUpsert.StatePaths and ManifestResult.StateValues: two
// policies' rules (application and cluster failover, 16 each) of at most
// 1 KiB, and values a little longer than a label value, so that a value
// too long for a label is seen to be so rather than cut.
const (
	MaxStatePaths      = 32
	MaxStatePathBytes  = 1 << 10
	MaxStateValueBytes = 256
)

// MaxStopAfterSeconds (30 days) bounds WorkUpsert.StopAfterSeconds.
const MaxStopAfterSeconds = 30 * 24 * 3600

// WorkDelete tells the agent to delete every object of a Work.
type WorkDelete struct {
	Name string `json:"name"`
}

// ManifestResult is the state of one manifest of a Work.
type ManifestResult struct {
	Ordinal   int    `json:"ordinal"`
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Health is Healthy, Unhealthy or Unknown.
	Health  string `json:"health"`
	Message string `json:"message,omitempty"`
	// Status holds key status fields (readyReplicas, ...), as a JSON object.
	Status json.RawMessage `json:"status,omitempty"`
	// StateValues are the values of the Work's StatePaths on the object's
	// status, by template; a template that does not evaluate (a missing
	// field, a parse error) is absent. Older hubs ignore them.
	StateValues map[string]string `json:"stateValues,omitempty"`
}

// WorkApplied answers WorkUpsert. Applied is false if any manifest failed;
// Message then says which and why.
type WorkApplied struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	Applied    bool   `json:"applied"`
	Message    string `json:"message,omitempty"`
	// Reason, when not applied, is ReasonRefusedByMemberPolicy if the
	// member cluster's policy refused a manifest; empty otherwise. Older
	// hubs ignore it.
	Reason    string           `json:"reason,omitempty"`
	Manifests []ManifestResult `json:"manifests,omitempty"`
}

// ReasonRefusedByMemberPolicy says that the member cluster's own policy
// (set by its owner in the agent's flags) refused a manifest: the agent
// did not apply it.
const ReasonRefusedByMemberPolicy = "RefusedByMemberPolicy"

// WorkDeleted confirms that the objects of a Work are gone.
type WorkDeleted struct {
	Name string `json:"name"`
}

// WorkStatus reports a change in the health of an applied Work's objects.
type WorkStatus struct {
	Name       string           `json:"name"`
	Generation int64            `json:"generation"`
	Manifests  []ManifestResult `json:"manifests"`
}

// Type implements Message.
func (*WorkInventory) Type() MessageType { return TypeWorkInventory }

// Type implements Message.
func (*WorkUpsert) Type() MessageType { return TypeWorkUpsert }

// Type implements Message.
func (*WorkDelete) Type() MessageType { return TypeWorkDelete }

// Type implements Message.
func (*WorkApplied) Type() MessageType { return TypeWorkApplied }

// Type implements Message.
func (*WorkDeleted) Type() MessageType { return TypeWorkDeleted }

// Type implements Message.
func (*WorkStatus) Type() MessageType { return TypeWorkStatus }

// Validate bounds the inventory and checks every entry.
func (m *WorkInventory) Validate() error {
	checks := []error{inRange("len(works)", len(m.Works), 0, maxInventory)}
	for i, w := range m.Works {
		checks = append(checks, workName(fmt.Sprintf("works[%d].name", i), w.Name),
			positive(fmt.Sprintf("works[%d].generation", i), w.Generation))
	}
	return invalid(TypeWorkInventory, checks...)
}

// Validate requires a name, a generation, manifests that are JSON objects
// and a fencing time of at most MaxStopAfterSeconds.
func (m *WorkUpsert) Validate() error {
	checks := []error{
		workName("name", m.Name),
		positive("generation", m.Generation),
		maxLen("binding", m.Binding, maxShortString),
		inRange("len(manifests)", len(m.Manifests), 0, maxManifests),
		inRange("stopAfterSeconds", m.StopAfterSeconds, 0, MaxStopAfterSeconds),
	}
	for i, raw := range m.Manifests {
		checks = append(checks, jsonObject(fmt.Sprintf("manifests[%d]", i), raw))
	}
	checks = append(checks, inRange("len(statePaths)", len(m.StatePaths), 0, MaxStatePaths))
	for i, p := range m.StatePaths {
		field := fmt.Sprintf("statePaths[%d]", i)
		checks = append(checks, required(field, p), maxLen(field, p, MaxStatePathBytes))
	}
	return invalid(TypeWorkUpsert, checks...)
}

// Validate requires a name.
func (m *WorkDelete) Validate() error {
	return invalid(TypeWorkDelete, workName("name", m.Name))
}

// Validate checks the name, generation and manifest results.
func (m *WorkApplied) Validate() error {
	checks := []error{workName("name", m.Name), positive("generation", m.Generation), maxLen("message", m.Message, maxLongString),
		appliedReason(m)}
	return invalid(TypeWorkApplied, append(checks, manifestResults(m.Manifests)...)...)
}

// appliedReason allows no reason but the member policy's, on a failure.
func appliedReason(m *WorkApplied) error {
	if m.Reason == "" || m.Reason == ReasonRefusedByMemberPolicy && !m.Applied {
		return nil
	}
	return fmt.Errorf("reason %q: want none, or %s when not applied", truncate(m.Reason), ReasonRefusedByMemberPolicy)
}

// Validate requires a name.
func (m *WorkDeleted) Validate() error {
	return invalid(TypeWorkDeleted, workName("name", m.Name))
}

// Validate checks the name, generation and manifest results.
func (m *WorkStatus) Validate() error {
	checks := []error{workName("name", m.Name), positive("generation", m.Generation)}
	return invalid(TypeWorkStatus, append(checks, manifestResults(m.Manifests)...)...)
}

// Health values a ManifestResult may carry.
const (
	HealthHealthy   = "Healthy"
	HealthUnhealthy = "Unhealthy"
	HealthUnknown   = "Unknown"
)

// maxManifestStatus bounds the status fields reported per manifest.
const maxManifestStatus = 16 << 10

func manifestResults(results []ManifestResult) []error {
	checks := []error{inRange("len(manifests)", len(results), 0, maxManifests)}
	for i, r := range results {
		field := fmt.Sprintf("manifests[%d]", i)
		checks = append(checks,
			inRange(field+".ordinal", r.Ordinal, 0, maxManifests-1),
			maxLen(field+".group", r.Group, maxShortString),
			maxLen(field+".version", r.Version, maxShortString),
			maxLen(field+".kind", r.Kind, maxShortString),
			maxLen(field+".resource", r.Resource, maxShortString),
			maxLen(field+".namespace", r.Namespace, maxShortString),
			maxLen(field+".name", r.Name, maxShortString),
			maxLen(field+".message", r.Message, maxLongString),
			health(field+".health", r.Health),
		)
		if len(r.Status) > 0 {
			checks = append(checks, maxLen(field+".status", string(r.Status), maxManifestStatus), jsonObject(field+".status", r.Status))
		}
		checks = append(checks, stateValues(field+".stateValues", r.StateValues))
	}
	return checks
}

// stateValues bounds the values reported for a Work's StatePaths.
func stateValues(field string, values map[string]string) error {
	if len(values) > MaxStatePaths {
		return fmt.Errorf("%s has %d entries, limit %d", field, len(values), MaxStatePaths)
	}
	// Sorted so that the reported problem is the same every time.
	for _, path := range slices.Sorted(maps.Keys(values)) {
		switch {
		case path == "":
			return fmt.Errorf("%s has an empty template", field)
		case len(path) > MaxStatePathBytes:
			return fmt.Errorf("%s: template %q is %d bytes long, limit %d", field, truncate(path), len(path), MaxStatePathBytes)
		case len(values[path]) > MaxStateValueBytes:
			return fmt.Errorf("%s[%q] is %d bytes long, limit %d", field, truncate(path), len(values[path]), MaxStateValueBytes)
		}
	}
	return nil
}

func health(field, h string) error {
	switch h {
	case HealthHealthy, HealthUnhealthy, HealthUnknown:
		return nil
	}
	return fmt.Errorf("%s %q must be Healthy, Unhealthy or Unknown", field, truncate(h))
}

// workName checks a Work name: a DNS subdomain of at most 63 bytes, so the
// agent can put it in a label.
func workName(field, name string) error {
	if err := maxLen(field, name, maxWorkNameBytes); err != nil {
		return err
	}
	return clusterName(field, name)
}

// jsonObject checks that raw is a JSON object (the decoder already checked
// that it is valid JSON).
func jsonObject(field string, raw json.RawMessage) error {
	if s := strings.TrimLeft(string(raw), " \t\r\n"); !strings.HasPrefix(s, "{") {
		return fmt.Errorf("%s must be a JSON object", field)
	}
	return nil
}
