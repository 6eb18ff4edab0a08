package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// taintSyntax is the accepted forms of a TAINT argument, for messages.
const taintSyntax = "key=value:Effect, key:Effect, key:Effect- or key-"

// taintEffects are the effects a taint may have.
var taintEffects = []corev1.TaintEffect{
	corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute, v1alpha1.TaintEffectPreferNoExecute,
}

// taintChange is one TAINT argument: a taint to add, or taints to remove.
type taintChange struct {
	arg    string // as given, for messages
	remove bool
	// taint is what to add, or what to remove: its key and, unless Effect
	// is empty (key-), its effect. The value of a removal is ignored.
	taint corev1.Taint
}

// parseTaintArgs parses and validates every TAINT argument and rejects
// arguments that contradict each other.
func parseTaintArgs(args []string) ([]taintChange, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("missing taints: give at least one of %s", taintSyntax)
	}
	changes := make([]taintChange, 0, len(args))
	for _, arg := range args {
		ch, err := parseTaintArg(arg)
		if err != nil {
			return nil, err
		}
		if err := checkAgainst(changes, ch); err != nil {
			return nil, err
		}
		changes = append(changes, ch)
	}
	return changes, nil
}

// parseTaintArg parses one argument in kubectl's taint syntax.
func parseTaintArg(arg string) (taintChange, error) {
	ch := taintChange{arg: arg}
	spec, remove := strings.CutSuffix(arg, "-")
	ch.remove = remove
	keyValue, effect, hasEffect := strings.Cut(spec, ":")
	if strings.Contains(effect, ":") {
		return ch, fmt.Errorf("invalid taint %q: more than one ':'; expected %s", arg, taintSyntax)
	}
	key, value, hasValue := strings.Cut(keyValue, "=")
	if !hasEffect && !remove {
		return ch, fmt.Errorf("invalid taint %q: missing ':Effect' (one of %s); to remove every taint with this key write %q",
			arg, effectNames(), key+"-")
	}
	if hasValue && strings.Contains(value, "=") {
		return ch, fmt.Errorf("invalid taint %q: more than one '='; expected %s", arg, taintSyntax)
	}
	if hasValue && !hasEffect {
		return ch, fmt.Errorf("invalid taint %q: a removal is key:Effect- or key-, without a value", arg)
	}
	ch.taint = corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
	if err := checkTaint(ch.taint, hasEffect, remove); err != nil {
		return ch, fmt.Errorf("invalid taint %q: %w", arg, err)
	}
	return ch, nil
}

// checkTaint validates key, value and, when given, effect. Keys the hub
// owns are refused; remove says whether the argument removes the taint,
// for the hint of what to do instead.
func checkTaint(t corev1.Taint, hasEffect, remove bool) error {
	if errs := content.IsQualifiedName(t.Key); len(errs) > 0 {
		return fmt.Errorf("key %q: %s", t.Key, strings.Join(errs, "; "))
	}
	if err := checkHubKey(t.Key, remove); err != nil {
		return err
	}
	if errs := content.IsLabelValue(t.Value); len(errs) > 0 {
		return fmt.Errorf("value %q: %s", t.Value, strings.Join(errs, "; "))
	}
	if hasEffect && !slices.Contains(taintEffects, t.Effect) {
		return fmt.Errorf("effect %q is not one of %s", t.Effect, effectNames())
	}
	return nil
}

// hubKeys are the taint keys the hub sets and clears itself, with when it
// does, under their Flotilla names; Karmada's spellings
// (cluster.karmada.io/...) name the same taints. A taint of one of them
// added by hand would be taken away again (or, for terminating, evict
// every workload that does not tolerate it), and one removed by hand put
// back.
var hubKeys = map[string]string{
	v1alpha1.TaintClusterNotReady:    "from the cluster's health, while Ready is False",
	v1alpha1.TaintClusterUnreachable: "from the cluster's health, while Ready is Unknown (its lease expired)",
	v1alpha1.TaintClusterTerminating: "on a cluster being deleted",
}

// Prefixes of the hub's taint keys: Flotilla's, and Karmada's spelling,
// which tolerations may use for the same taints.
const (
	flotillaKeyPrefix = "cluster.flotilla.io/"
	karmadaKeyPrefix  = "cluster.karmada.io/"
)

// checkHubKey refuses a taint key the hub owns, saying why and what to do
// instead.
func checkHubKey(key string, remove bool) error {
	own := key
	if suffix, ok := strings.CutPrefix(key, karmadaKeyPrefix); ok {
		own = flotillaKeyPrefix + suffix
	}
	spelling := ""
	if own != key {
		spelling = fmt.Sprintf("%s is Karmada's spelling of %s, and ", key, own)
	}
	if own == v1alpha1.TaintClusterUnschedulable {
		return fmt.Errorf("%sthe hub maintains %s from spec.unschedulable: use 'flotilla cordon' or 'flotilla uncordon'", spelling, own)
	}
	when, ok := hubKeys[own]
	if !ok {
		return nil
	}
	instead := "to keep workloads off the cluster use 'flotilla cordon', or a taint with a key of your own, e.g. example.com/maintenance=planned:NoSchedule"
	if remove {
		instead = fmt.Sprintf("to keep a workload on the cluster while it has the taint, give its policy a toleration of %s", own)
	}
	return fmt.Errorf("%sthe hub sets and clears %s itself, %s; %s", spelling, own, when, instead)
}

func effectNames() string {
	names := make([]string, len(taintEffects))
	for i, e := range taintEffects {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

// checkAgainst rejects ch when an earlier argument adds or removes the
// same taint: the command would not say what the operator wants.
func checkAgainst(earlier []taintChange, ch taintChange) error {
	for _, e := range earlier {
		if e.taint.Key != ch.taint.Key {
			continue
		}
		sameEffect := e.taint.Effect == ch.taint.Effect
		switch {
		case e.remove != ch.remove && (sameEffect || e.taint.Effect == "" || ch.taint.Effect == ""):
			return fmt.Errorf("invalid taint %q: %q changes the same taint; cannot both add and remove it", ch.arg, e.arg)
		case e.remove == ch.remove && sameEffect:
			return fmt.Errorf("invalid taint %q: %q already names this key and effect", ch.arg, e.arg)
		}
	}
	return nil
}

// taintResult is a cluster's taints after the changes were applied.
type taintResult struct {
	taints         []corev1.Taint
	added, removed bool // whether anything was added or changed, removed
}

// verb is what the command prints after "cluster/NAME".
func (r taintResult) verb() string {
	switch {
	case r.added:
		return "tainted"
	case r.removed:
		return "untainted"
	}
	return "already tainted"
}

// applyTaints applies changes to a cluster's taints. Removing a taint that
// is not there is an error, and so is giving an existing key and effect a
// new value without overwrite. New and overwritten taints get no
// timeAdded: the hub stamps it.
func applyTaints(cluster string, taints []corev1.Taint, changes []taintChange, overwrite bool) (taintResult, error) {
	r := taintResult{taints: slices.Clone(taints)}
	for _, ch := range changes {
		var err error
		if ch.remove {
			err = r.remove(cluster, ch)
		} else {
			err = r.add(cluster, ch, overwrite)
		}
		if err != nil {
			return taintResult{}, err
		}
	}
	return r, nil
}

func (r *taintResult) remove(cluster string, ch taintChange) error {
	n := len(r.taints)
	r.taints = slices.DeleteFunc(r.taints, func(t corev1.Taint) bool {
		return t.Key == ch.taint.Key && (ch.taint.Effect == "" || t.Effect == ch.taint.Effect)
	})
	if len(r.taints) == n {
		if ch.taint.Effect == "" {
			return fmt.Errorf("cluster %q has no taint with key %q (from %q)", cluster, ch.taint.Key, ch.arg)
		}
		return fmt.Errorf("cluster %q has no taint %s:%s (from %q)", cluster, ch.taint.Key, ch.taint.Effect, ch.arg)
	}
	r.removed = true
	return nil
}

func (r *taintResult) add(cluster string, ch taintChange, overwrite bool) error {
	i := slices.IndexFunc(r.taints, func(t corev1.Taint) bool {
		return t.Key == ch.taint.Key && t.Effect == ch.taint.Effect
	})
	switch {
	case i < 0:
		r.taints = append(r.taints, ch.taint)
	case r.taints[i].Value == ch.taint.Value:
		return nil // already there
	case !overwrite:
		return fmt.Errorf("cluster %q already has taint %s; use --overwrite to replace it with %s",
			cluster, taintString(r.taints[i]), taintString(ch.taint))
	default:
		r.taints[i].Value = ch.taint.Value
		r.taints[i].TimeAdded = nil // a new value is a new taint
	}
	r.added = true
	return nil
}
