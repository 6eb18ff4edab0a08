package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// workLoop opens the work stream, tells the hub which Works the agent holds
// and their state, then hands the hub's upserts and deletes to the Work
// engine and forwards the engine's answers until ctx ends or the stream
// fails. This goroutine is the stream's only writer.
func (s *session) workLoop(ctx context.Context) error {
	str, err := s.conn.OpenStreamSync(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("open work stream: %w", explainConnError(err))
	}
	if err := protocol.WriteStreamKind(str, protocol.StreamWork); err != nil {
		return explainConnError(err)
	}
	engine := s.agent.works
	// Subscribe first: what happens while the inventory is sent follows it.
	feed := engine.Subscribe()
	defer feed.Close()
	select {
	case <-ctx.Done():
		return nil
	case <-engine.Loaded():
	}
	// Taken before the inventory: a Work fenced after it was listed ends
	// the session (see forwardWork).
	fenced := engine.FenceSignal()
	inventory := &protocol.WorkInventory{Works: engine.Inventory()}
	if err := s.sendWork(str, inventory); err != nil {
		return err
	}
	s.log.Info("work inventory sent", "works", len(inventory.Works))
	for _, status := range engine.Statuses() {
		if err := s.sendWork(str, status); err != nil {
			return err
		}
	}

	readErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { readErr <- s.readWork(protocol.NewReader(str, protocol.MaxWorkFrameSize)) })
	err = s.forwardWork(ctx, str, feed, readErr, fenced)
	str.CancelRead() // ends readWork if it still reads
	wg.Wait()
	return err
}

// errFencedWhileConnected ends a session in which the engine fenced a
// Work: the hub restores fenced Works when an inventory reports them, so
// the agent reconnects to send one.
var errFencedWhileConnected = errors.New("a Work was fenced while the hub's acknowledgements were late; reconnecting so that the hub restores it")

// forwardWork sends the engine's messages until ctx ends, reading fails or
// a Work is fenced.
func (s *session) forwardWork(ctx context.Context, str transport.Stream, feed *work.Feed, readErr <-chan error, fenced <-chan struct{}) error {
	for {
		for m, ok := feed.Pop(); ok; m, ok = feed.Pop() {
			if err := s.sendWork(str, m); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			return err
		case <-fenced:
			return errFencedWhileConnected
		case <-feed.Ready():
		}
	}
}

// sendWork writes one message on the work stream. A message that breaks
// the protocol's limits is logged and dropped rather than have the hub end
// the session over it.
func (s *session) sendWork(str transport.Stream, m protocol.Message) error {
	if v, ok := m.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			s.log.Error("not sending an invalid work message", "type", m.Type(), "err", err)
			return nil
		}
	}
	if err := writeFrame(str, m, writeTimeout); err != nil {
		return fmt.Errorf("send %v: %w", m.Type(), explainConnError(err))
	}
	return nil
}

// readWork hands the hub's upserts and deletes to the engine until the
// stream ends.
func (s *session) readWork(r *protocol.Reader) error {
	for {
		m, err := r.ReadMessage()
		switch {
		case errors.Is(err, io.EOF):
			return errors.New("hub closed the work stream")
		case malformed(err):
			return fmt.Errorf("%w: work stream: %w", errProtocol, err)
		case err != nil:
			return fmt.Errorf("read work stream: %w", explainConnError(err))
		}
		switch m := m.(type) {
		case *protocol.WorkUpsert:
			s.log.Debug("Work upsert received", "work", m.Name, "generation", m.Generation, "manifests", len(m.Manifests))
			s.agent.works.Upsert(m)
		case *protocol.WorkDelete:
			s.log.Debug("Work delete received", "work", m.Name)
			s.agent.works.Delete(m.Name)
		default:
			return fmt.Errorf("%w: unexpected %v on the work stream", errProtocol, m.Type())
		}
	}
}
