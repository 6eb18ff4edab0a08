package membercluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/test/process"
)

// Start-up limits. A component that is not ready by then has failed; the
// API server is usually ready in about 2 s.
const (
	readyTimeout     = 90 * time.Second
	readyPollPeriod  = 100 * time.Millisecond
	bindAttempts     = 3
	bindErrorMessage = "address already in use"
)

// startReady starts a component made by configure, which picks fresh ports
// each time it is called, and waits until ready reports success. A component
// that lost the race for its port is started again on new ports.
func startReady(ctx context.Context, configure func() (*process.Process, error), ready func(context.Context) error) (*process.Process, error) {
	var lastErr error
	for range bindAttempts {
		p, err := configure()
		if err != nil {
			return nil, err
		}
		if err := p.Start(); err != nil {
			return nil, err
		}
		err = waitReady(ctx, p, ready)
		if err == nil {
			return p, nil
		}
		_ = p.Stop()
		if !p.HasExited() || !logContains(p.LogPath, bindErrorMessage) {
			return nil, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no free port after %d attempts: %w", bindAttempts, lastErr)
}

// waitReady polls ready until it succeeds, the process exits, or the
// start-up limit passes.
func waitReady(ctx context.Context, p *process.Process, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	ticker := time.NewTicker(readyPollPeriod)
	defer ticker.Stop()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited():
			return p.ExitError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %w (log: %s)", p.Name, readyTimeout, err, p.LogPath)
		case <-ticker.C:
		}
	}
}

func logContains(path, text string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), text)
}

// stopAll stops processes in order and joins their errors.
func stopAll(procs ...*process.Process) error {
	var errs []error
	for _, p := range procs {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	return errors.Join(errs...)
}
