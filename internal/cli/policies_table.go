package cli

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// maxSelectorsShown is how many selectors the SELECTORS column lists before
// it only counts the rest: the column would push the others off screen.
const maxSelectorsShown = 3

// policiesTable decodes the hub's answer (a list, or one policy when single)
// into the "get policies" table. A ClusterPropagationPolicy has the shape of
// a PropagationPolicy, so both decode into one.
func policiesTable(raw []byte, o tableOptions) (*table, error) {
	items, err := decodeItems[v1alpha1.PropagationPolicy](raw, o.single, "PropagationPolicy")
	if err != nil {
		return nil, err
	}
	t := o.newTable("NAMESPACE", "NAME", "PRIORITY", "SELECTORS", "SCHEDULING", "AGE")
	for i := range items {
		p := &items[i]
		t.add(o.row(p.Namespace, p.Name, priority(p.Spec.Priority), selectorsText(p.Spec.ResourceSelectors),
			schedulingText(p.Spec.Placement.ReplicaScheduling), age(o.now, p.CreationTimestamp.Time))...)
	}
	return t, nil
}

// priority is the policy's priority; unset is 0, as it counts.
func priority(p *int32) string {
	if p == nil {
		return "0"
	}
	return strconv.Itoa(int(*p))
}

// selectorsText lists the first few selectors, then how many more there are.
func selectorsText(sels []v1alpha1.ResourceSelector) string {
	if len(sels) == 0 {
		return noneList
	}
	shown := make([]string, 0, maxSelectorsShown+1)
	for i, s := range sels {
		if i == maxSelectorsShown {
			shown = append(shown, fmt.Sprintf("+%d more", len(sels)-i))
			break
		}
		shown = append(shown, selectorText(s))
	}
	return strings.Join(shown, ",")
}

// selectorText is apiVersion/Kind, then /NAMESPACE/NAME (NAME * for any)
// when it names a namespace, /NAME when it names only a name, and the label
// selector in brackets: "apps/v1/Deployment/nginx",
// "v1/ConfigMap/shop/*[app=web]".
func selectorText(s v1alpha1.ResourceSelector) string {
	text := s.APIVersion + "/" + s.Kind
	switch {
	case s.Namespace != "":
		text += "/" + s.Namespace + "/" + cmp.Or(s.Name, "*")
	case s.Name != "":
		text += "/" + s.Name
	}
	if s.LabelSelector != nil {
		text += "[" + labelSelectorText(s.LabelSelector) + "]"
	}
	return text
}
