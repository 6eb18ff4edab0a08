package agent

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// maxClusterLabels is the most registration labels a join may carry (the
// protocol's bound).
const maxClusterLabels = 64

// bootstrapTokenForm is kubeadm's bootstrap token: token-id.token-secret.
var bootstrapTokenForm = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// CheckBootstrapToken checks that token has a bootstrap token's form,
// [a-z0-9]{6}.[a-z0-9]{16}. Its error never repeats the token, which is a
// secret.
func CheckBootstrapToken(token string) error {
	if !bootstrapTokenForm.MatchString(token) {
		return fmt.Errorf("not a bootstrap token (%d characters): want [a-z0-9]{6}.[a-z0-9]{16}, as `flotilla token create` prints", len(token))
	}
	return nil
}

// ParseLabels parses "key=value,key2=value2" into labels and checks them
// as CheckLabels does. An empty string means no labels.
func ParseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	labels := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value", item)
		}
		if _, dup := labels[key]; dup {
			return nil, fmt.Errorf("key %q given twice", key)
		}
		labels[key] = value
	}
	return labels, CheckLabels(labels)
}

// CheckLabels checks that labels are Kubernetes label keys and values, at
// most 64 of them.
func CheckLabels(labels map[string]string) error {
	if len(labels) > maxClusterLabels {
		return fmt.Errorf("%d labels, at most %d", len(labels), maxClusterLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("key %q is not a label key: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(labels[k]); len(msgs) > 0 {
			return fmt.Errorf("value %q of %s is not a label value: %s", labels[k], k, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// CheckMetadataValue checks a provider, region or zone: a Kubernetes label
// value (empty, or up to 63 letters, digits, '-', '_' and '.', starting
// and ending with a letter or digit), so that the hub can select by it.
func CheckMetadataValue(value string) error {
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return fmt.Errorf("%q is not a label value: %s", value, strings.Join(msgs, "; "))
	}
	return nil
}

// metadataTheHubIgnores lists the registration metadata the agent would
// send and the hub does not take from an agent: all but the labels
// under protocol.AgentLabelPrefix.
func (cfg Config) metadataTheHubIgnores() []string {
	var ignored []string
	for _, f := range []struct{ flag, value string }{
		{"--cluster-provider", cfg.Provider}, {"--cluster-region", cfg.Region}, {"--cluster-zone", cfg.Zone},
	} {
		if f.value != "" {
			ignored = append(ignored, f.flag+"="+f.value)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		if !protocol.IsAgentLabel(k) {
			ignored = append(ignored, "--cluster-labels "+k+"="+cfg.Labels[k])
		}
	}
	return ignored
}

// validateJoin checks the join settings and registration metadata.
func (cfg Config) validateJoin() []error {
	var errs []error
	if cfg.BootstrapToken != "" {
		if err := CheckBootstrapToken(cfg.BootstrapToken); err != nil {
			errs = append(errs, fmt.Errorf("bootstrap token: %w", err))
		}
		if cfg.HubCAHash == "" {
			errs = append(errs, errors.New("a bootstrap token needs the hub CA hash (sha256:<hex>, as `flotilla token create` prints it)"))
		}
	}
	if cfg.HubCAHash != "" {
		if _, err := pki.ParsePin(cfg.HubCAHash); err != nil {
			errs = append(errs, fmt.Errorf("hub CA hash: %w", err))
		}
	}
	for _, f := range []struct{ name, value string }{{"provider", cfg.Provider}, {"region", cfg.Region}, {"zone", cfg.Zone}} {
		if err := CheckMetadataValue(f.value); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s %w", f.name, err))
		}
	}
	if err := CheckLabels(cfg.Labels); err != nil {
		errs = append(errs, fmt.Errorf("cluster labels: %w", err))
	}
	return errs
}
