package main

import (
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// setMemoryLimit gives the Go runtime a soft memory limit of 90 % of the
// container's (cgroup's) memory limit, unless GOMEMLIMIT is set or
// AUTOMEMLIMIT says otherwise (off, or another ratio). Without one the
// heap grows to twice what is live before each collection: a hub holding
// 10,000 agents' sessions in about 1.4 GiB would pass the chart's 2 GiB
// limit and be killed for memory it could have collected.
func setMemoryLimit(logger *slog.Logger, provider memlimit.Provider) {
	if _, err := memlimit.SetGoMemLimitWithOpts(memlimit.WithProvider(provider), memlimit.WithLogger(logger)); err != nil {
		logger.Warn("no Go memory limit from the container's: the heap may grow to twice what is live", "err", err)
	}
}
