package membercluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// BinDirEnv names the environment variable that points at the test binaries;
// without it, the nearest .testbin folder above the working directory is used.
const BinDirEnv = "FLOTILLA_TESTBIN"

// stagesFile is the KWOK stage configuration that `make testbin` writes.
const stagesFile = "kwok-stages.yaml"

// apiServerBinaries are what an API-server-only environment runs;
// allBinaries adds what makes a cluster run workloads.
var (
	apiServerBinaries = []string{"etcd", "kube-apiserver"}
	allBinaries       = slices.Concat(apiServerBinaries, []string{"kube-controller-manager", "kube-scheduler", "kwok", stagesFile})
)

// FindBinDir returns the folder holding the test binaries: $FLOTILLA_TESTBIN,
// or the first .testbin found walking up from the working directory.
func FindBinDir() (string, error) { return findBinDir(allBinaries) }

// findBinDir is FindBinDir, checking only for the required files.
func findBinDir(required []string) (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, checkBinDir(dir, required)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find test binaries: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		candidate := filepath.Join(dir, ".testbin")
		if info, err := os.Stat(candidate); err == nil && info.IsDir() {
			return candidate, checkBinDir(candidate, required)
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no .testbin folder above %s and $%s is not set: run `make testbin` first", wd, BinDirEnv)
		}
	}
}

func checkBinDir(dir string, required []string) error {
	var missing []error
	for _, name := range required {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("test binaries in %s are incomplete, run `make testbin`: %w", dir, errors.Join(missing...))
	}
	return nil
}
