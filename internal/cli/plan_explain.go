package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/flotilla-io/flotilla/scheduler"
)

// writePlanGroups explains, after the plan's table, which clusterAffinities
// group the plan used and why: the groups passed over with their reason,
// then, for a group with overflow tiers, how many replicas each tier took
// and why a tier took any (the tiers before it were full). Nothing for a
// placement without clusterAffinities.
func writePlanGroups(w io.Writer, in *planInput, result scheduler.Result) error {
	if in.Placement == nil || len(in.Placement.ClusterAffinities) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nAffinity group: %s\n", result.AffinityName)
	for _, p := range result.Passed {
		fmt.Fprintf(&b, "  group %s passed over: %s\n", p.Name, p.Reason)
	}
	var before []string // why the tiers before could take no more
	for k, t := range result.Tiers {
		label := "tier " + t.Name
		if k > 0 {
			label = "overflow tier " + t.Name
		}
		fmt.Fprintf(&b, "  %s: %s\n", label, tierText(t, before))
		if len(t.Clusters) == 0 {
			before = append(before, t.Name+" without a cluster that fits")
		} else {
			before = append(before, t.Name+" full")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tierText says what a tier took: "4 replicas in 2 clusters with room for
// 20 (idc full)"; before says why each tier before it took no more.
func tierText(t scheduler.Tier, before []string) string {
	if len(t.Clusters) == 0 {
		return "no cluster fits"
	}
	text := fmt.Sprintf("%s in %s with room for %d", plural(t.Replicas, "replica"), plural(int64(len(t.Clusters)), "cluster"), t.Capacity)
	switch {
	case t.Replicas > 0 && len(before) > 0:
		text += " (" + strings.Join(before, ", ") + ")"
	case t.Replicas == 0 && t.Capacity > 0:
		text += " (not needed)"
	}
	return text
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
