package work

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/agent/ownerref"
)

// record is what the member cluster remembers of a Work, so that a
// restarted agent knows its inventory and what to prune and delete.
type record struct {
	// Generation is the generation last applied successfully, 0 if none.
	Generation int64
	Binding    string
	// Objects are the objects of Generation, in manifest order.
	Objects []objectRef
	// Pending are objects that attempts at a later generation may have
	// created: they are recorded before they are applied, so that none
	// escapes a delete.
	Pending []objectRef
	// StopAfterSeconds is the fencing setting of the latest generation the
	// hub sent, so that a restarted agent that cannot reach the hub still
	// fences the Work. 0: not fenced.
	StopAfterSeconds int32
	// FencedAt, when set, is when the agent stopped the Work's workloads
	// because it was cut off from the hub; they stay stopped until the hub
	// sends the Work again.
	FencedAt time.Time
	// StatePaths are the JSONPath templates of Generation, so that a
	// restarted agent, which the hub does not send the Work again, still
	// reports their values.
	StatePaths []string
}

// fenced says whether the record says the Work is fenced.
func (r *record) fenced() bool { return r != nil && !r.FencedAt.IsZero() }

// all is every object the Work may have in the cluster.
func (r *record) all() []objectRef {
	if r == nil {
		return nil
	}
	return union(r.Objects, r.Pending)
}

// Keys of a record ConfigMap's data.
const (
	keyGeneration = "generation"
	keyBinding    = "binding"
	keyObjects    = "objects"
	keyPending    = "pending"
	keyStopAfter  = "stopAfterSeconds"
	keyFencedAt   = "fencedAt"
	keyStatePaths = "statePaths"
)

func (r *record) data() (map[string]string, error) {
	data := map[string]string{keyGeneration: strconv.FormatInt(r.Generation, 10), keyBinding: r.Binding}
	if r.StopAfterSeconds > 0 {
		data[keyStopAfter] = strconv.FormatInt(int64(r.StopAfterSeconds), 10)
	}
	if r.fenced() {
		data[keyFencedAt] = r.FencedAt.UTC().Format(time.RFC3339Nano)
	}
	for key, refs := range map[string][]objectRef{keyObjects: r.Objects, keyPending: r.Pending} {
		if len(refs) == 0 {
			continue
		}
		raw, err := json.Marshal(refs)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", key, err)
		}
		data[key] = string(raw)
	}
	if len(r.StatePaths) > 0 {
		raw, err := json.Marshal(r.StatePaths)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", keyStatePaths, err)
		}
		data[keyStatePaths] = string(raw)
	}
	return data, nil
}

func parseRecord(data map[string]string) (*record, error) {
	gen, err := strconv.ParseInt(data[keyGeneration], 10, 64)
	if err != nil || gen < 0 {
		return nil, fmt.Errorf("generation %q is not a generation", data[keyGeneration])
	}
	r := &record{Generation: gen, Binding: data[keyBinding]}
	if v, ok := data[keyStopAfter]; ok {
		after, err := strconv.ParseInt(v, 10, 32)
		if err != nil || after < 0 {
			return nil, fmt.Errorf("%s %q is not a number of seconds", keyStopAfter, v)
		}
		r.StopAfterSeconds = int32(after)
	}
	if v, ok := data[keyFencedAt]; ok {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyFencedAt, err)
		}
		r.FencedAt = at
	}
	for key, refs := range map[string]*[]objectRef{keyObjects: &r.Objects, keyPending: &r.Pending} {
		if data[key] == "" {
			continue
		}
		if err := json.Unmarshal([]byte(data[key]), refs); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	if v, ok := data[keyStatePaths]; ok {
		if err := json.Unmarshal([]byte(v), &r.StatePaths); err != nil {
			return nil, fmt.Errorf("%s: %w", keyStatePaths, err)
		}
	}
	return r, nil
}

// recordStore keeps one ConfigMap per Work in the system namespace, named
// after the Work, owned by owner (nil: none).
type recordStore struct {
	client    kubernetes.Interface
	namespace string
	owner     *ownerref.Owner
}

// load ensures the system namespace exists and reads every record, adding
// the owner to those without it. A record that cannot be read is reported
// in bad and left alone (but for the owner).
func (s recordStore) load(ctx context.Context) (records map[string]*record, bad map[string]error, err error) {
	if err := EnsureNamespace(ctx, s.client, s.namespace); err != nil {
		return nil, nil, err
	}
	list, err := s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelWorkRecord + "=true"})
	if err != nil {
		return nil, nil, fmt.Errorf("list Work records in namespace %s: %w", s.namespace, err)
	}
	records, bad = map[string]*record{}, map[string]error{}
	for _, cm := range list.Items {
		s.adopt(ctx, &cm)
		r, err := parseRecord(cm.Data)
		if err != nil {
			bad[cm.Name] = err
			continue
		}
		records[cm.Name] = r
	}
	return records, bad, nil
}

// save writes the record of work, and adds the owner to a record made
// without it.
func (s recordStore) save(ctx context.Context, work string, r *record) error {
	data, err := r.data()
	if err != nil {
		return fmt.Errorf("record of Work %s: %w", work, err)
	}
	cm := corev1ac.ConfigMap(work, s.namespace).
		WithLabels(map[string]string{LabelWorkRecord: "true", LabelManagedBy: ManagedBy}).
		WithData(data)
	saved, err := s.client.CoreV1().ConfigMaps(s.namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("write record of Work %s to ConfigMap %s/%s: %w", work, s.namespace, work, err)
	}
	s.adopt(ctx, saved)
	return nil
}

// adopt adds the owner to the record cm if it lacks it. The owner is added
// by a patch of its own rather than in the apply: the apply would take the
// reference away again whenever a later agent cannot read the owner.
func (s recordStore) adopt(ctx context.Context, cm *corev1.ConfigMap) {
	what := fmt.Sprintf("Work record ConfigMap %s/%s", s.namespace, cm.Name)
	s.owner.Adopt(ctx, what, cm.OwnerReferences, func(ctx context.Context, patch []byte) error {
		_, err := s.client.CoreV1().ConfigMaps(s.namespace).Patch(ctx, cm.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		return err
	})
}

// remove deletes the record of work; a missing record is no error.
func (s recordStore) remove(ctx context.Context, work string) error {
	err := s.client.CoreV1().ConfigMaps(s.namespace).Delete(ctx, work, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete record of Work %s: %w", work, err)
	}
	return nil
}
