// Package gossip joins the hub replicas into a hashicorp/memberlist group:
// they find each other from a list of addresses (or one name that
// resolves to all of them), notice a member's death within seconds, and
// send each other messages over memberlist's encrypted, labelled streams.
// The hub uses it for the leader's session table (package handover).
package gossip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Config describes one member.
type Config struct {
	// Name is unique in the group (the replica's election identity).
	Name string
	// BindAddr is the host:port to listen on, TCP and UDP.
	BindAddr string
	// AdvertiseAddr is the host:port the others reach this member at;
	// empty: the bound address, or with a wildcard host the first private
	// address of this machine.
	AdvertiseAddr string
	// Join are the host:port of other members (a name may resolve to
	// several); tried again every JoinRetry while this member is alone.
	Join      []string
	JoinRetry time.Duration
	// Key encrypts and authenticates every packet (16, 24 or 32 bytes);
	// Label is checked on every packet, so that two groups on one network
	// never merge.
	Key   []byte
	Label string
	// SendTimeout bounds a message to one member (and memberlist's TCP
	// operations).
	SendTimeout time.Duration
	// Receive is given every message another member sent; it must not
	// keep the slice.
	Receive func(msg []byte)
	// Left, if set, is told the name of a member that died or left.
	Left   func(name string)
	Logger *slog.Logger
}

// Group is this process's membership.
type Group struct {
	cfg    Config
	ml     *memberlist.Memberlist
	logger *slog.Logger
}

// Start listens and returns the member; Run joins the others.
func Start(cfg Config) (*Group, error) {
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	host, port, err := splitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, port, port
	if cfg.AdvertiseAddr != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = splitHostPort(cfg.AdvertiseAddr); err != nil {
			return nil, fmt.Errorf("gossip advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
	}
	mc.SecretKey, mc.Label = cfg.Key, cfg.Label
	if cfg.SendTimeout > 0 {
		mc.TCPTimeout = cfg.SendTimeout
	}
	g := &Group{cfg: cfg, logger: cfg.Logger.With("gossip", cfg.Name)}
	mc.Delegate = delegate{receive: cfg.Receive}
	mc.Events = events{logger: g.logger, left: cfg.Left}
	mc.Logger = log.New(levelWriter{logger: g.logger}, "", 0)
	if g.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("gossip on %s: %w", cfg.BindAddr, err)
	}
	return g, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q: want 0-65535", portText)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// Run joins the configured members, again while this one is alone, until
// ctx ends; then it leaves the group (the others notice at once rather
// than by failed probes) and stops listening.
func (g *Group) Run(ctx context.Context) {
	defer func() {
		if err := g.ml.Leave(time.Second); err != nil {
			g.logger.Debug("gossip: leave", "err", err)
		}
		if err := g.ml.Shutdown(); err != nil {
			g.logger.Warn("gossip: shut down", "err", err)
		}
	}()
	if len(g.cfg.Join) == 0 {
		<-ctx.Done()
		return
	}
	retry := time.NewTicker(max(g.cfg.JoinRetry, 100*time.Millisecond))
	defer retry.Stop()
	warned := false
	for {
		if g.ml.NumMembers() < 2 {
			if n, err := g.ml.Join(g.cfg.Join); n == 0 || err != nil {
				level := slog.LevelWarn
				if warned {
					level = slog.LevelDebug
				}
				warned = true
				g.logger.Log(ctx, level, "gossip: no other hub replica reached yet; trying again", "join", g.cfg.Join, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		}
	}
}

// Members is how many members are alive, this one included.
func (g *Group) Members() int { return g.ml.NumMembers() }

// Addr is the host:port this member listens on.
func (g *Group) Addr() string {
	n := g.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// SendToOthers sends msg to every other live member at once, each within
// SendTimeout (a member that died and is not noticed yet delays no
// other), and returns to how many it was written. The errors of the
// others are joined.
func (g *Group) SendToOthers(msg []byte) (int, error) {
	self := g.ml.LocalNode().Name
	var mu sync.Mutex
	sent := 0
	var errs []error
	var wg sync.WaitGroup
	for _, n := range g.ml.Members() {
		if n.Name == self {
			continue
		}
		wg.Go(func() {
			err := g.ml.SendReliable(n, msg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("to %s (%s): %w", n.Name, n.Address(), err))
				return
			}
			sent++
		})
	}
	wg.Wait()
	return sent, errors.Join(errs...)
}

// SendTo sends msg to the live member named name, within SendTimeout.
func (g *Group) SendTo(name string, msg []byte) error {
	for _, n := range g.ml.Members() {
		if n.Name == name {
			if err := g.ml.SendReliable(n, msg); err != nil {
				return fmt.Errorf("to %s (%s): %w", n.Name, n.Address(), err)
			}
			return nil
		}
	}
	return fmt.Errorf("%s is not a live member of the group", name)
}

// delegate hands messages to Receive; the group carries no node metadata,
// broadcasts or push/pull state.
type delegate struct{ receive func([]byte) }

func (delegate) NodeMeta(int) []byte             { return nil }
func (delegate) GetBroadcasts(int, int) [][]byte { return nil }
func (delegate) LocalState(bool) []byte          { return nil }
func (delegate) MergeRemoteState([]byte, bool)   {}
func (d delegate) NotifyMsg(msg []byte) {
	if d.receive != nil {
		d.receive(msg)
	}
}

// events logs who joins and leaves, and tells left who left.
type events struct {
	logger *slog.Logger
	left   func(name string)
}

func (e events) NotifyJoin(n *memberlist.Node) {
	e.logger.Info("gossip: hub replica joined", "member", n.Name, "addr", n.Address())
}
func (e events) NotifyLeave(n *memberlist.Node) {
	e.logger.Info("gossip: hub replica left or died", "member", n.Name, "addr", n.Address())
	if e.left != nil {
		e.left(n.Name)
	}
}
func (e events) NotifyUpdate(*memberlist.Node) {}

// levelWriter turns memberlist's "[LEVEL] memberlist: ..." lines into
// slog records of that level.
type levelWriter struct{ logger *slog.Logger }

func (w levelWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG] ": slog.LevelDebug, "[INFO] ": slog.LevelInfo, "[WARN] ": slog.LevelWarn, "[ERR] ": slog.LevelError, "[ERROR] ": slog.LevelError} {
		if rest, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			line, level = rest, l
			break
		}
	}
	w.logger.Log(context.Background(), level, string(line))
	return len(p), nil
}
