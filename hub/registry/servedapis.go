package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/protocol"
)

// What the hub stores of an agent's served APIs is what a Kubernetes
// cluster could serve: entries whose names Kubernetes would not allow are
// dropped (an aggregated API server's discovery is not validated, so an
// honest agent may relay a bad one: the rest of its list still counts),
// and a list larger than maxStoredAPIBytes is refused whole (the last
// stored one stays). A cluster with hundreds of CRDs serves ~100 KiB.
const (
	maxStoredAPIBytes   = 512 << 10
	reasonAPIsRefused   = "ServedAPIsRefused"
	maxDroppedInMessage = 3
)

// admitServedAPIsLocked returns what of apis may be stored (nil: nothing),
// recording an event and counting what it refused.
func (r *Registry) admitServedAPIsLocked(cluster string, e *entry, apis *protocol.ServedAPIs, now time.Time) *protocol.ServedAPIs {
	if apis == nil {
		return nil
	}
	kept, dropped := validAPIs(apis)
	var why string
	if len(dropped) > 0 {
		r.stats.apiEntriesDropped.Add(int64(len(dropped)))
		why = fmt.Sprintf("dropped %d served API entries whose names Kubernetes would not allow (%s)", len(dropped), strings.Join(dropped[:min(len(dropped), maxDroppedInMessage)], "; "))
	}
	if size := jsonSize(kept); size > maxStoredAPIBytes {
		r.stats.apisRefused.Add(1)
		why = fmt.Sprintf("served APIs refused: %d bytes, more than the %d a Cluster stores; the last list stored stays", size, maxStoredAPIBytes)
		kept = nil
	}
	if why != "" {
		r.recordLocked(e.obj, corev1.EventTypeWarning, reasonAPIsRefused, why, now)
		r.logger.Warn("served APIs refused in part or whole", "cluster", cluster, "why", why)
	}
	return kept
}

// validAPIs is apis without the entries Kubernetes would not allow, and a
// description of each dropped one.
func validAPIs(apis *protocol.ServedAPIs) (*protocol.ServedAPIs, []string) {
	kept := &protocol.ServedAPIs{Items: make([]protocol.APIEnablement, 0, len(apis.Items))}
	var dropped []string
	for _, gv := range apis.Items {
		if why := badGroupVersion(gv.GroupVersion); why != "" {
			dropped = append(dropped, why)
			continue
		}
		out := protocol.APIEnablement{GroupVersion: gv.GroupVersion}
		for _, res := range gv.Resources {
			if why := badResource(res); why != "" {
				dropped = append(dropped, gv.GroupVersion+": "+why)
				continue
			}
			out.Resources = append(out.Resources, res)
		}
		kept.Items = append(kept.Items, out)
	}
	return kept, dropped
}

// badGroupVersion says why gv ("v1" or "group/version") is not one
// Kubernetes serves, "" if it could be.
func badGroupVersion(gv string) string {
	group, version, grouped := strings.Cut(gv, "/")
	if !grouped {
		group, version = "", gv
	}
	if grouped {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return fmt.Sprintf("group %.80q: %s", group, errs[0])
		}
	}
	if errs := validation.IsDNS1035Label(version); len(errs) > 0 {
		return fmt.Sprintf("version %.80q: %s", version, errs[0])
	}
	return ""
}

// badResource says why a resource's plural name or kind is not one
// Kubernetes allows, "" if it is.
func badResource(res protocol.APIResource) string {
	if errs := validation.IsDNS1123Label(res.Name); len(errs) > 0 {
		return fmt.Sprintf("resource %.80q: %s", res.Name, errs[0])
	}
	if errs := validation.IsDNS1035Label(strings.ToLower(res.Kind)); len(errs) > 0 {
		return fmt.Sprintf("kind %.80q: not a Kubernetes kind name", res.Kind)
	}
	return ""
}

// jsonSize is the size of apis as the Cluster stores them.
func jsonSize(apis *protocol.ServedAPIs) int {
	data, err := json.Marshal(apiEnablements(apis))
	if err != nil {
		return 0
	}
	return len(data)
}
