package bootstraptoken

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/protocol"
)

const (
	// MetadataKey is the data key of a token Secret that holds the
	// ClusterMetadata (JSON) its join registers the Cluster with. Like the
	// token itself, only those who may read kube-system's Secrets see it.
	MetadataKey = "flotilla-cluster-metadata"
	// MaxLabels bounds a token's labels, as the join protocol bounds an
	// agent's.
	MaxLabels = 64
)

// ClusterMetadata is what the hub registers a cluster with when it joins
// with a token: the operator chose it at `token create`, so a joining
// agent cannot place its cluster into the selectors of policies or into
// a zone of its own choosing.
type ClusterMetadata struct {
	Provider string            `json:"provider,omitempty"`
	Region   string            `json:"region,omitempty"`
	Zone     string            `json:"zone,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// IsZero reports whether m sets nothing.
func (m ClusterMetadata) IsZero() bool {
	return m.Provider == "" && m.Region == "" && m.Zone == "" && len(m.Labels) == 0
}

// Validate checks m as Kubernetes would check labels (provider, region
// and zone are label values, for they are selected like them), naming
// the flag of `token create` at fault. Labels under
// protocol.AgentLabelPrefix are the agent's own to set.
func (m ClusterMetadata) Validate() error {
	for _, f := range []struct{ flag, value string }{{"--provider", m.Provider}, {"--region", m.Region}, {"--zone", m.Zone}} {
		if msgs := validation.IsValidLabelValue(f.value); len(msgs) > 0 {
			return fmt.Errorf("%s %q: not a label value: %s", f.flag, f.value, strings.Join(msgs, "; "))
		}
	}
	if len(m.Labels) > MaxLabels {
		return fmt.Errorf("--label: %d labels, at most %d", len(m.Labels), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("--label %s=%s: %q is not a label key: %s", k, m.Labels[k], k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(m.Labels[k]); len(msgs) > 0 {
			return fmt.Errorf("--label %s=%s: %q is not a label value: %s", k, m.Labels[k], m.Labels[k], strings.Join(msgs, "; "))
		}
		if protocol.IsAgentLabel(k) {
			return fmt.Errorf("--label %s=%s: labels under %s are the ones the cluster's agent sets about itself; choose another key", k, m.Labels[k], protocol.AgentLabelPrefix)
		}
	}
	return nil
}

// ParseLabel parses one --label KEY=VALUE into labels, refusing a key
// given twice; Validate checks key and value.
func ParseLabel(labels map[string]string, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("--label %q: want KEY=VALUE", kv)
	}
	if _, dup := labels[k]; dup {
		return fmt.Errorf("--label %q: key %s given twice", kv, k)
	}
	labels[k] = v
	return nil
}

// String says what m registers, e.g. "provider aws, region eu-1,
// labels tier=edge"; "" when it sets nothing.
func (m ClusterMetadata) String() string {
	var parts []string
	for _, f := range []struct{ name, value string }{{"provider", m.Provider}, {"region", m.Region}, {"zone", m.Zone}} {
		if f.value != "" {
			parts = append(parts, f.name+" "+f.value)
		}
	}
	if labels := m.LabelsText(); labels != "" {
		parts = append(parts, "labels "+labels)
	}
	return strings.Join(parts, ", ")
}

// LabelsText is m's labels as k=v,k2=v2, sorted by key.
func (m ClusterMetadata) LabelsText() string {
	pairs := make([]string, 0, len(m.Labels))
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		pairs = append(pairs, k+"="+m.Labels[k])
	}
	return strings.Join(pairs, ",")
}

// encode is m as its Secret stores it; nil when it sets nothing.
func (m ClusterMetadata) encode() []byte {
	if m.IsZero() {
		return nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil // strings and a map of strings always encode
	}
	return data
}

// decodeMetadata reads a Secret's MetadataKey, checking it as Validate
// does: the Secret could have been edited by hand.
func decodeMetadata(data []byte) (ClusterMetadata, error) {
	var m ClusterMetadata
	if len(data) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return ClusterMetadata{}, fmt.Errorf("%s: want JSON {provider, region, zone, labels}: %w", MetadataKey, err)
	}
	if err := m.Validate(); err != nil {
		return ClusterMetadata{}, fmt.Errorf("%s: %w", MetadataKey, err)
	}
	return m, nil
}
