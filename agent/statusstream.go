package agent

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// UnchangedReportEvery is how often a status that has not changed is
// reported all the same: the hub needs only changes (a new session always
// starts with a full report), so a steady fleet costs it renewals alone.
const UnchangedReportEvery = 5 * time.Minute

// statusLoop opens the status stream, reports cluster status at once, and
// then collects it every StatusInterval until ctx ends, reporting it when it
// changed (or UnchangedReportEvery passed). It owns the stream, so its
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
	var gate reportGate
	for {
		if err := s.report(ctx, str, &sentAPIs, &gate); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// report collects one cluster status and sends it on str unless gate says
// the hub has it. The served APIs go along only when the hub of this
// session does not have them yet.
func (s *session) report(ctx context.Context, str transport.Stream, sentAPIs *string, gate *reportGate) error {
	status := s.agent.status.Collect(ctx)
	if ctx.Err() != nil {
		return nil
	}
	apisKey := s.agent.status.APIsKey()
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
	now := s.agent.clock.Now()
	if !gate.due(status, now) {
		return nil
	}
	if err := writeFrame(str, status, writeTimeout); err != nil {
		return fmt.Errorf("send cluster status: %w", explainConnError(err))
	}
	gate.sent(status, now)
	if status.ServedAPIs != nil {
		*sentAPIs = apisKey
	}
	s.log.Debug("cluster status sent", "healthy", status.APIServerHealthy,
		"nodes", status.NodesTotal, "nodesReady", status.NodesReady)
	return nil
}

// reportGate decides whether a collected status is worth sending: the
// first of a session, one that differs from the last sent (its time of
// observation aside), or one unchanged for UnchangedReportEvery. The zero
// value sends the next report.
type reportGate struct {
	last   protocol.ClusterStatus // ObservedAt and ServedAPIs cleared
	sentAt time.Time
	any    bool
}

// due reports whether status should be sent at now.
func (g *reportGate) due(status *protocol.ClusterStatus, now time.Time) bool {
	if !g.any || status.ServedAPIs != nil || now.Sub(g.sentAt) >= UnchangedReportEvery {
		return true
	}
	return !sameReport(&g.last, status)
}

// sent records that status was sent at now.
func (g *reportGate) sent(status *protocol.ClusterStatus, now time.Time) {
	g.last = *status
	g.last.ObservedAt, g.last.ServedAPIs = time.Time{}, nil
	g.last.Allocatable, g.last.Allocated = maps.Clone(status.Allocatable), maps.Clone(status.Allocated)
	g.sentAt, g.any = now, true
}

// sameReport compares what the hub keeps of two reports: everything but
// the time of observation and the served APIs (sent on their own terms).
func sameReport(a, b *protocol.ClusterStatus) bool {
	return a.KubernetesVersion == b.KubernetesVersion && a.APIServerHealthy == b.APIServerHealthy &&
		a.HealthMessage == b.HealthMessage && a.NodesTotal == b.NodesTotal && a.NodesReady == b.NodesReady &&
		maps.Equal(a.Allocatable, b.Allocatable) && maps.Equal(a.Allocated, b.Allocated)
}
