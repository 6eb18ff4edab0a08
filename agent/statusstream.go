package agent

import (
	"context"
	"fmt"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// statusLoop opens the status stream and reports cluster status at once and
// then every StatusInterval until ctx ends. It owns the stream, so its
// writes need no lock, and it never touches the control stream.
func (s *session) statusLoop(ctx context.Context) error {
	str, err := s.conn.OpenStreamSync(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("open status stream: %w", explainConnError(err))
	}
	if err := protocol.WriteStreamKind(str, protocol.StreamStatus); err != nil {
		return explainConnError(err)
	}
	ticker := s.agent.clock.NewTicker(s.agent.cfg.StatusInterval)
	defer ticker.Stop()
	sentAPIs := "" // the served APIs this session's hub has, by key
	for {
		if err := s.report(ctx, str, &sentAPIs); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// report collects one cluster status and sends it on str. The served APIs
// go along only when the hub of this session does not have them yet.
func (s *session) report(ctx context.Context, str transport.Stream, sentAPIs *string) error {
	status := s.agent.status.collect(ctx)
	if ctx.Err() != nil {
		return nil
	}
	apisKey := s.agent.status.apisKey
	if apisKey == *sentAPIs {
		status.ServedAPIs = nil
	}
	// The numbers come from the member cluster: check them against the
	// protocol's limits rather than have the hub drop the connection.
	if err := status.Validate(); err != nil {
		// Health matters most: send it without the figures that fail.
		s.log.Error("cluster resources or APIs fail validation; reporting health without them", "err", err)
		status.Allocatable, status.Allocated, status.ServedAPIs = nil, nil, nil
		if err := status.Validate(); err != nil {
			s.log.Error("not sending an invalid cluster status", "err", err)
			return nil
		}
	}
	if err := writeFrame(str, status, writeTimeout); err != nil {
		return fmt.Errorf("send cluster status: %w", explainConnError(err))
	}
	if status.ServedAPIs != nil {
		*sentAPIs = apisKey
	}
	s.log.Debug("cluster status sent", "healthy", status.APIServerHealthy,
		"nodes", status.NodesTotal, "nodesReady", status.NodesReady)
	return nil
}
