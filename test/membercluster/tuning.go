package membercluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// The member clusters' throughput with Options.Tuned: client rate limits
// well above what a 2-core machine can serve, so the components wait for
// the API server rather than for their own limiters, and more workers for
// the controllers that turn a Deployment's new replica count into pods.
const (
	tunedQPS     = 1000
	tunedWorkers = 25
	// tunedPodStages is how many pods KWOK moves through their stages
	// (Running, Ready) at once; KWOK's default is 4.
	tunedPodStages = 32
	kwokConfigFile = "kwok-tuned.yaml"
)

// tuning is the components' extra flags for Options.Tuned.
type tuning struct {
	controllerManager, scheduler, kwok []string
}

// tunedComponents writes KWOK's configuration into dir and returns the
// flags that raise the controller-manager's, the scheduler's and KWOK's
// throughput.
func tunedComponents(dir string) (tuning, error) {
	// KWOK 0.8 takes a configuration's options as they are: the ones
	// left out are zero, not KWOK's defaults (which these are).
	config := fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: %d
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
`, tunedPodStages)
	path := filepath.Join(dir, kwokConfigFile)
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return tuning{}, fmt.Errorf("KWOK configuration: %w", err)
	}
	clientLimits := []string{fmt.Sprintf("--kube-api-qps=%d", tunedQPS), fmt.Sprintf("--kube-api-burst=%d", 2*tunedQPS)}
	return tuning{
		controllerManager: append(clientLimits,
			fmt.Sprintf("--concurrent-deployment-syncs=%d", tunedWorkers),
			fmt.Sprintf("--concurrent-replicaset-syncs=%d", tunedWorkers)),
		scheduler: clientLimits,
		kwok:      []string{"--config=" + path},
	}, nil
}
