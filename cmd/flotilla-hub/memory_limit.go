package main

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// setMemoryLimit gives the Go runtime a soft memory limit of 90 % of the
// container's (cgroup's) memory limit, unless GOMEMLIMIT is set or
// AUTOMEMLIMIT says otherwise (off, or another ratio). Without one the
// heap grows to twice what is live before each collection, and the
// container is killed for memory the hub could have collected. It logs
// the limit in force, once.
func setMemoryLimit(logger *slog.Logger, provider memlimit.Provider) {
	// The library's own log lines (an ERROR for a cgroup it cannot read)
	// would repeat this function's.
	_, err := memlimit.SetGoMemLimitWithOpts(memlimit.WithProvider(provider))
	switch limit := debug.SetMemoryLimit(-1); {
	case err != nil && !errors.Is(err, memlimit.ErrCgroupsNotSupported):
		logger.Warn("no Go memory limit from the container's: the heap may grow to twice what is live", "err", err)
	case limit != math.MaxInt64:
		logger.Info("Go memory limit", "MiB", limit>>20, "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"), "AUTOMEMLIMIT", os.Getenv("AUTOMEMLIMIT"))
	}
}
