package membercluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// heartbeatStage is the KWOK stage that rewrites a Ready node's status.
const heartbeatStage = "node-heartbeat"

// nodeLeaseSeconds is the node Leases' duration when KWOK renews them, a
// kubelet's default (renewed every quarter of it).
const nodeLeaseSeconds = 40

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
	path := filepath.Join(dir, stagesFile)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", fmt.Errorf("KWOK stages: %w", err)
	}
	return path, nil
}

// withHeartbeatEvery returns the stages document set with the heartbeat
// stage's delay changed; an error if it has no such stage.
func withHeartbeatEvery(stages []byte, period time.Duration) ([]byte, error) {
	var out bytes.Buffer
	found := false
	for doc := range bytes.SplitSeq(stages, []byte("\n---\n")) {
		// The split took the newline that ended the document's last line.
		doc = append(bytes.TrimPrefix(bytes.TrimLeft(doc, "\n"), []byte("---\n")), '\n')
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var stage map[string]any
		if err := yaml.Unmarshal(doc, &stage); err != nil {
			return nil, err
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
			var err error
			if doc, err = yaml.Marshal(stage); err != nil {
				return nil, err
			}
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimRight(doc, "\n"))
		out.WriteString("\n")
	}
	if !found {
		return nil, fmt.Errorf("no stage named %s", heartbeatStage)
	}
	return out.Bytes(), nil
}
