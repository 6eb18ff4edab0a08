package join

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/protocol"
)

const (
	// EventMetadataIgnored on a Cluster: its agent's join asked for
	// metadata the hub does not take from an agent.
	EventMetadataIgnored = "AgentMetadataIgnored"
	// maxIgnored and maxIgnoredItem bound what a log line and an event
	// say of it: the agent chose it.
	maxIgnored     = 8
	maxIgnoredItem = 96
)

// Registration is what the hub registers a joining cluster's Cluster
// with, decided at the join (the request carries it): provider, region,
// zone and labels from the token, which the operator chose, and the
// agent's labels under protocol.AgentLabelPrefix. The agent's word on
// anything else could place its cluster into the selectors of policies
// that place Secrets, or into a zone whose eviction rate it would skew.
type Registration struct {
	Provider string            `json:"provider,omitempty"`
	Region   string            `json:"region,omitempty"`
	Zone     string            `json:"zone,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Ignored is what the agent asked for and did not get, at most
	// maxIgnored entries and a count of the rest.
	Ignored []string `json:"ignored,omitempty"`
}

// registrationOf decides a join's Registration from its token's metadata
// and what the agent asked for. What the agent asked for that the token
// sets anyway is not ignored, only superfluous.
func registrationOf(m bootstraptoken.ClusterMetadata, j *protocol.JoinRequest) Registration {
	r := Registration{Provider: m.Provider, Region: m.Region, Zone: m.Zone, Labels: maps.Clone(m.Labels)}
	var ignored []string
	for _, f := range []struct{ name, asked, token string }{
		{"provider", j.Provider, m.Provider}, {"region", j.Region, m.Region}, {"zone", j.Zone, m.Zone},
	} {
		if f.asked != "" && f.asked != f.token {
			ignored = append(ignored, fmt.Sprintf("%s %q", f.name, f.asked))
		}
	}
	kept := 0
	for _, k := range slices.Sorted(maps.Keys(j.Labels)) {
		v := j.Labels[k]
		switch {
		case !protocol.IsAgentLabel(k):
			if tv, ok := m.Labels[k]; !ok || tv != v {
				ignored = append(ignored, "label "+k+"="+v)
			}
		case len(validation.IsQualifiedName(k))+len(validation.IsValidLabelValue(v)) > 0:
			ignored = append(ignored, "label "+k+"="+v+" (not a valid label)")
		case kept == protocol.MaxAgentLabels:
			ignored = append(ignored, fmt.Sprintf("label %s=%s (more than %d agent labels)", k, v, protocol.MaxAgentLabels))
		default:
			if r.Labels == nil {
				r.Labels = map[string]string{}
			}
			r.Labels[k] = v
			kept++
		}
	}
	r.Ignored = bounded(ignored)
	return r
}

// bounded is at most maxIgnored items of at most maxIgnoredItem bytes,
// and how many more there were.
func bounded(items []string) []string {
	var out []string
	for i, s := range items {
		if i == maxIgnored {
			return append(out, fmt.Sprintf("and %d more", len(items)-maxIgnored))
		}
		if len(s) > maxIgnoredItem {
			s = strings.ToValidUTF8(s[:maxIgnoredItem], "") + "..."
		}
		out = append(out, s)
	}
	return out
}

// registration decides what a join registers its Cluster with, and
// warns of what the agent asked for and does not get.
func (c *Controller) registration(j *protocol.JoinRequest, t bootstraptoken.Token) Registration {
	r := registrationOf(t.Metadata, j)
	if len(r.Ignored) > 0 {
		c.counts.metadataIgnored.Add(1)
		c.logger.Warn("the joining agent asked for cluster metadata that only the token or an operator sets; ignored",
			"cluster", j.ClusterName, "token", t.ID, "ignored", strings.Join(r.Ignored, ", "), "agentLabelPrefix", protocol.AgentLabelPrefix)
	}
	return r
}

// registration reads a request's Registration; a bad annotation (edited
// by hand) gives none rather than failing the join.
func registration(csr *certificatesv1.CertificateSigningRequest) Registration {
	var r Registration
	_ = json.Unmarshal([]byte(csr.Annotations[RegistrationAnnotation]), &r)
	return r
}

// withRegistration is c with what a join registers put on it: the
// token's provider, region and zone where it sets them, its labels and
// the agent's added or changed. Nothing is removed: a join of a Cluster
// that exists (a --replace token, a Cluster an operator made first) keeps
// what the operator set unless its token sets it again.
func withRegistration(c *v1alpha1.Cluster, r Registration) *v1alpha1.Cluster {
	update := c.DeepCopy()
	for _, f := range []struct {
		field *string
		value string
	}{{&update.Spec.Provider, r.Provider}, {&update.Spec.Region, r.Region}, {&update.Spec.Zone, r.Zone}} {
		if f.value != "" {
			*f.field = f.value
		}
	}
	if len(r.Labels) > 0 && update.Labels == nil {
		update.Labels = map[string]string{}
	}
	maps.Copy(update.Labels, r.Labels)
	return update
}

// ignored records on the Cluster what its agent's join asked for and did
// not get.
func (c *Controller) ignored(cl *v1alpha1.Cluster, csr *certificatesv1.CertificateSigningRequest, tokenID string, r Registration) {
	msg := fmt.Sprintf("the agent's join (token %s, certificate request %s) asked for %s: ignored, for provider, region, zone and labels come from the token "+
		"(flotilla token create --provider/--region/--zone/--label) or an operator; an agent sets only labels under %s",
		tokenID, csr.Name, strings.Join(r.Ignored, ", "), protocol.AgentLabelPrefix)
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: cl.Name, UID: cl.UID}
	c.recorder().Event(ref, corev1.EventTypeWarning, EventMetadataIgnored, msg)
}
