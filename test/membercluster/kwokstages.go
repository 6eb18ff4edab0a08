package membercluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// heartbeatStage is the KWOK stage that rewrites a Ready node's status.
	heartbeatStage = "node-heartbeat"
	// heartbeatStagesFile is the stage configuration written with another
	// heartbeat, in Options.Dir (never over the testbin's).
	heartbeatStagesFile = "kwok-stages-heartbeat.yaml"
	// nodeLeaseSeconds is the node Leases' duration when KWOK renews them,
	// a kubelet's default (renewed every quarter of it).
	nodeLeaseSeconds = 40
)

// writeStages writes, into dir, the KWOK stage configuration of binDir with
// the node heartbeat's delay set so that each Ready node's status is
// rewritten every period on average (uniformly between half and one and a
// half periods, so that nodes started together do not stay in step), and
// returns its path.
func writeStages(binDir, dir string, period time.Duration) (string, error) {
	src := filepath.Join(binDir, stagesFile)
	raw, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("KWOK stages: %w", err)
	}
	out, err := withHeartbeatEvery(raw, period)
	if err != nil {
		return "", fmt.Errorf("KWOK stages %s: %w", src, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("KWOK stages: %w", err)
	}
	path := filepath.Join(dir, heartbeatStagesFile)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", fmt.Errorf("KWOK stages: %w", err)
	}
	return path, nil
}

// withHeartbeatEvery returns the stage documents with the heartbeat
// stage's delay changed (that document re-encoded, the others as they
// were); an error if there is no such stage.
func withHeartbeatEvery(stages []byte, period time.Duration) ([]byte, error) {
	var out bytes.Buffer
	found := false
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stages)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var stage map[string]any
		if err := yaml.Unmarshal(doc, &stage); err != nil {
			return nil, err
		}
		if stage == nil {
			continue // an empty document
		}
		// The reader keeps a separator that opens the input.
		if first, rest, ok := bytes.Cut(doc, []byte("\n")); ok && bytes.HasPrefix(first, []byte("---")) {
			doc = rest
		}
		if meta, _ := stage["metadata"].(map[string]any); meta != nil && meta["name"] == heartbeatStage {
			spec, _ := stage["spec"].(map[string]any)
			if spec == nil {
				return nil, fmt.Errorf("stage %s has no spec", heartbeatStage)
			}
			spec["delay"] = map[string]any{
				"durationMilliseconds":       (period / 2).Milliseconds(),
				"jitterDurationMilliseconds": (period * 3 / 2).Milliseconds(),
			}
			found = true
			if doc, err = yaml.Marshal(stage); err != nil {
				return nil, err
			}
		}
		out.WriteString("---\n")
		out.Write(doc)
		if !bytes.HasSuffix(doc, []byte("\n")) {
			out.WriteString("\n")
		}
	}
	if !found {
		return nil, fmt.Errorf("no stage named %s", heartbeatStage)
	}
	return out.Bytes(), nil
}
