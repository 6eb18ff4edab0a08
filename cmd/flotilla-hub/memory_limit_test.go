package main

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The hub takes 90 % of its container's memory limit as the Go runtime's,
// unless the operator's environment says otherwise. Not parallel: the
// limit is the process's.
func TestSetMemoryLimit(t *testing.T) {
	const gib = 1 << 30
	unlimited := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	tests := []struct {
		name     string
		env      map[string]string
		provider memlimit.Provider
		want     int64
		warns    bool
	}{
		{name: "container limit", provider: memlimit.Limit(gib), want: gib * 9 / 10},
		{name: "GOMEMLIMIT wins", env: map[string]string{"GOMEMLIMIT": "3GiB"}, provider: memlimit.Limit(gib), want: math.MaxInt64},
		{name: "AUTOMEMLIMIT off", env: map[string]string{"AUTOMEMLIMIT": "off"}, provider: memlimit.Limit(gib), want: math.MaxInt64},
		{name: "AUTOMEMLIMIT ratio", env: map[string]string{"AUTOMEMLIMIT": "0.5"}, provider: memlimit.Limit(gib), want: gib / 2},
		{name: "no container limit", provider: unlimited, want: math.MaxInt64},
		{name: "bad AUTOMEMLIMIT", env: map[string]string{"AUTOMEMLIMIT": "most"}, provider: memlimit.Limit(gib), want: math.MaxInt64, warns: true},
	}
	previous := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(previous) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} {
				t.Setenv(name, "") // restored after the test
				if v, ok := tt.env[name]; ok {
					os.Setenv(name, v)
				} else {
					os.Unsetenv(name)
				}
			}
			debug.SetMemoryLimit(math.MaxInt64)
			var logs bytes.Buffer
			setMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)), tt.provider)
			if got := debug.SetMemoryLimit(-1); got != tt.want {
				t.Errorf("Go memory limit = %d, want %d", got, tt.want)
			}
			if warned := strings.Contains(logs.String(), "level=WARN"); warned != tt.warns {
				t.Errorf("warned = %v, want %v; logs:\n%s", warned, tt.warns, logs.String())
			}
		})
	}
}
