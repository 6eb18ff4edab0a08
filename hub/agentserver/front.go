package agentserver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/dispatch"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/hub/join"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// Config is what the agents' front needs from the hub's configuration.
type Config struct {
	// QUICAddr is the UDP address agents dial.
	QUICAddr string
	// WebSocketAddr is the TCP address of the WebSocket fallback; empty:
	// QUIC's port, on TCP (if free); WebSocketOff: none.
	WebSocketAddr string
	// DataDir holds the hub's CA and stateless reset key.
	DataDir string
	// TLSSANs are extra names or addresses for the serving certificate.
	TLSSANs []string
	// Handshakes bound the handshakes in flight, QUIC and TLS on TCP
	// together, and say when QUIC validates source addresses (zero
	// fields: the defaults).
	Handshakes HandshakeLimits
	// HandshakeTimeout: a QUIC handshake silent this long is dropped
	// (twice this in all); 0: DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// WebSocket caps the fallback's connections until their upgrade,
	// and times its TLS handshakes, headers and idle connections; zero
	// fields: DefaultWebSocketLimits'.
	WebSocket netlimit.ServerLimits
	// AgentCertTTL and AgentCSRApproval are for joins and renewals
	// (package join).
	AgentCertTTL     time.Duration
	AgentCSRApproval string
	// HubUser is the user the hub's clients authenticate as to its API:
	// the signer signs only the certificate requests it created.
	HubUser string
	// Health are the thresholds the granted lease follows.
	Health health.Config
	// HubID names this hub replica in sessions and welcomes.
	HubID  string
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// CAs are the hub's certificate authorities.
type CAs struct {
	// Hub signs the serving certificate; agents pin it.
	Hub *pki.CA
	// Agent signs agent certificates. Sessions accept certificates of
	// both: agents that joined before the agent CA existed hold one of
	// the hub CA until their next renewal.
	Agent *pki.CA
}

// Front is a replica's side that faces agents: the QUIC and WebSocket
// listeners, the agent server, the Work dispatcher and the answers to
// joins and certificate renewals. A hub alone opens it when it leads; a
// replica that gossips with the others opens it at start, so it serves
// agents whether it leads or stands by (package replicas then carries
// what its agents say to the leader).
type Front struct {
	agents     *agentServer
	dispatcher *dispatch.Dispatcher
	joins      *join.Controller

	udpConn *net.UDPConn
	quic    *quic.Transport
	ln      *quic.Listener
	ws      *webSocketListener // nil: no WebSocket fallback
	// serving: the QUIC listener accepts connections (/readyz).
	serving atomic.Bool

	agentsCtx  context.Context // ends with goodbye
	stopAgents context.CancelFunc
	servers    sync.WaitGroup // one per listener
	background sync.WaitGroup // the dispatcher, the WebSocket server
}

// Open listens for agents. Its dispatcher and its handlers on informers'
// Clusters are added before they start; Start serves.
func Open(ctx context.Context, cfg Config, cas CAs, clients, reports *kube.Clients, informers *controller.Informers,
	recorder controller.Recorder, backend Backend) (*Front, error) {
	logger := cfg.Logger
	cert, err := ca.ServingCertificate(cas.Hub, cfg.TLSSANs)
	if err != nil {
		return nil, fmt.Errorf("hub serving certificate: %w", err)
	}
	resetKey, err := ca.LoadStatelessResetKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	udpAddr, err := net.ResolveUDPAddr("udp", cfg.QUICAddr)
	if err != nil {
		return nil, fmt.Errorf("--quic-addr %q: %w", cfg.QUICAddr, err)
	}
	f := &Front{}
	if f.udpConn, err = net.ListenUDP("udp", udpAddr); err != nil {
		return nil, fmt.Errorf("listen for agents on %s (UDP): %w", cfg.QUICAddr, err)
	}
	opened := false
	defer func() {
		if !opened {
			f.Close()
		}
	}()
	if granted, err := growReceiveBuffer(f.udpConn, receiveBuffer); err != nil || granted < receiveBuffer {
		logger.Warn("the agents' UDP socket got a smaller receive buffer than asked: packets may be dropped while thousands of agents reconnect (raise net.core.rmem_max)",
			"asked", receiveBuffer, "granted", granted, "err", err)
	}
	handshakes := newHandshakeGate(cfg.Handshakes, logger)
	f.quic = &quic.Transport{Conn: f.udpConn, StatelessResetKey: resetKey, ConnContext: handshakes.admit, VerifySourceAddress: handshakes.verifySource}
	quicConf := protocol.QUICConfig()
	// What a peer that never completes its handshake (a spoofed Initial)
	// holds of the hub, and for how long.
	quicConf.HandshakeIdleTimeout = cmp.Or(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	// An agent needs a control and a status stream (Work streams later);
	// a low limit bounds what one connection can make the hub buffer.
	quicConf.MaxIncomingStreams = 8
	quicConf.MaxIncomingUniStreams = -1
	// Sessions accept agent certificates of either CA (see CAs.Agent); the
	// Cluster's recorded serial then decides (package agentcert).
	clientCAs := ca.Pool(cas.Agent, cas.Hub)
	if f.ln, err = f.quic.Listen(protocol.ServerTLSConfig(cert, clientCAs), quicConf); err != nil {
		return nil, fmt.Errorf("listen for agents on %s (UDP): %w", cfg.QUICAddr, err)
	}
	agentsCtx, stopAgents := context.WithCancel(ctx)
	f.agentsCtx, f.stopAgents = agentsCtx, stopAgents
	wsConfig := webSocketConfig{addr: cfg.WebSocketAddr, udp: f.udpConn.LocalAddr(), cert: cert, clientCAs: clientCAs,
		limits: cfg.WebSocket.Or(DefaultWebSocketLimits)}
	if f.ws, err = listenWebSocket(agentsCtx, wsConfig, handshakes, logger); err != nil {
		return nil, err
	}
	f.dispatcher = dispatch.New(reports, informers, recorder, cfg.Clock, logger)
	f.joins = join.New(clients, join.Config{CA: cas.Hub, AgentCA: cas.Agent, HubUser: cfg.HubUser, CertTTL: cfg.AgentCertTTL, Approval: cfg.AgentCSRApproval, Wait: joinWait, Recorder: recorder}, cfg.Clock, logger)
	f.agents = newAgentServer(cfg, backend, f.dispatcher, f.joins)
	f.agents.handshakes = handshakes
	informers.Clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		switch {
		case cur == nil:
			f.agents.revoke(old.Name, "cluster deleted: its certificates are revoked")
		case cur.DeletionTimestamp != nil:
			f.agents.revoke(cur.Name, "cluster being deleted: its certificates are revoked")
		case old == nil || old.Annotations[v1alpha1.AnnotationAgentCertificateSerial] != cur.Annotations[v1alpha1.AnnotationAgentCertificateSerial] ||
			old.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] != cur.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial]:
			f.agents.supersede(agentsCtx, cur)
		}
	})
	opened = true
	return f, nil
}

// Start serves agents until Goodbye (or the context Open had ends); the
// dispatcher runs until ctx ends.
func (f *Front) Start(ctx context.Context) {
	f.background.Go(func() { f.dispatcher.Run(ctx) })
	agentsCtx := f.agentsCtx
	f.serving.Store(true)
	f.servers.Go(func() {
		f.agents.serve(agentsCtx, gatedListener{transport.QUICListener{Listener: f.ln}})
		f.serving.Store(false)
	})
	if f.ws != nil {
		f.background.Go(func() { f.ws.serve(f.agents.logger) })
		f.servers.Go(func() { f.agents.serve(agentsCtx, f.ws) })
	}
}

// Goodbye tells every agent to go (each session's handler sends GoAway
// when the agents' context ends, while the listener still runs), waits
// for the sessions to end, then stops listening.
func (f *Front) Goodbye() {
	f.stopAgents()
	f.servers.Wait()
	_ = f.ln.Close()
	if f.ws != nil {
		f.ws.close()
	}
}

// WebSocketAddr is the WebSocket listener's address, "off" without one.
func (f *Front) WebSocketAddr() string {
	if f.ws == nil {
		return "off"
	}
	return f.ws.Addr().String()
}

// Close releases the sockets, after Goodbye and once the dispatcher's
// context ended.
func (f *Front) Close() {
	if f.stopAgents != nil {
		f.stopAgents()
	}
	f.background.Wait()
	if f.quic != nil {
		_ = f.quic.Close()
	}
	_ = f.udpConn.Close()
}

// Addr is the UDP address agents dial.
func (f *Front) Addr() net.Addr { return f.ln.Addr() }

// Serving says whether the QUIC listener accepts connections (/readyz).
func (f *Front) Serving() bool { return f.serving.Load() }

// Dispatcher sends Works down the agents' sessions.
func (f *Front) Dispatcher() *dispatch.Dispatcher { return f.dispatcher }

// Joins answers agents that join, and watches their requests; the hub
// runs it as a controller.
func (f *Front) Joins() *join.Controller { return f.joins }

// EndSession ends cluster's session id here, if it is still the live
// one: a newer session of the cluster serves it on another replica.
func (f *Front) EndSession(cluster, id, reason string) { f.agents.endSession(cluster, id, reason) }

// receiveBuffer is the receive buffer asked for the agents' UDP socket.
// quic-go asks for 7 MiB; at 10,000 agents on two cores the hub's socket
// still dropped 4,000 packets a second while the fleet reconnected after a
// restart (handshakes then time out and agents back off), and thousands in
// the bursts of a steady fleet.
const receiveBuffer = 32 << 20

// joinWait is how long a join waits for its certificate before the agent
// is told to come back (its request waits for approval).
const joinWait = 20 * time.Second

// Counters are what the agents' front counted since it opened.
type Counters struct {
	// Rejected are connections refused: identity, hello or frames.
	Rejected int64
	// Replaced are sessions ended by a newer one of their cluster, here
	// or on another replica.
	Replaced int64
	// RenewalDatagrams are renewals that came as QUIC datagrams.
	RenewalDatagrams int64
	// LimitedRenewals were beyond a session's rate: acknowledged, not
	// stamped again; CoalescedReports were status reports replaced by a
	// newer one before they were applied.
	LimitedRenewals, CoalescedReports int64
	// HandshakesRefused are first QUIC packets refused while
	// --max-handshakes were in flight; HandshakesSourceLimited those
	// refused while their source address had --max-handshakes-per-source.
	HandshakesRefused, HandshakesSourceLimited int64
	// Retries are QUIC Initial packets answered with a Retry (source
	// address validation); HandshakesAbandoned QUIC handshakes that ended
	// before the hub accepted their connection (timed out or failed).
	Retries, HandshakesAbandoned int64
	// WebSocketConns are the WebSocket fallback's connection counts
	// before their upgrade (zero without the fallback).
	WebSocketConns netlimit.Stats
	// JoinsLimited are join connections refused because their source
	// address tried too often.
	JoinsLimited int64
	// Joins are what the join controller's guard counted: failed joins,
	// and joins refused unread for their token ID or the hub's budget.
	Joins join.GuardCounts
	// Signer are what the agent certificate signer counted.
	Signer join.SignerCounts
}

// Counters returns the front's counts so far.
func (f *Front) Counters() Counters {
	s, g := f.agents, f.agents.handshakes
	c := Counters{
		Rejected: s.rejected.Load(), Replaced: s.replaced.Load(), RenewalDatagrams: s.renewalDatagrams.Load(),
		LimitedRenewals: s.limits.limitedRenewals.Load(), CoalescedReports: s.limits.coalescedReports.Load(),
		HandshakesRefused: g.refused.Load(), HandshakesSourceLimited: g.sourceLimited.Load(),
		Retries: g.retries.Load(), HandshakesAbandoned: g.abandoned.Load(), JoinsLimited: s.joinLimit.limitedCount(),
	}
	if f.ws != nil {
		c.WebSocketConns = f.ws.Stats()
	}
	if f.joins != nil {
		c.Joins = f.joins.GuardCounts()
		c.Signer = f.joins.SignerCounts()
	}
	return c
}

// Snapshot is the front's state now.
type Snapshot struct {
	// Sessions are the live agent sessions, WebSocketSessions those of
	// them over the WebSocket fallback.
	Sessions, WebSocketSessions int
	// HandshakesInFlight are handshakes under way, QUIC and TLS on TCP.
	HandshakesInFlight int64
}

// Snapshot returns the front's state now.
func (f *Front) Snapshot() Snapshot {
	total, websocket := f.agents.sessionCounts()
	return Snapshot{Sessions: total, WebSocketSessions: websocket, HandshakesInFlight: int64(f.agents.handshakes.held())}
}
