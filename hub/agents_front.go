package hub

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/dispatch"
	"github.com/flotilla-io/flotilla/hub/join"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// agentFront is a replica's side that faces agents: the QUIC and WebSocket
// listeners, the agent server, the Work dispatcher and the answers to
// joins and certificate renewals. A hub alone opens it when it leads; a
// replica that gossips with the others opens it at start, so it serves
// agents whether it leads or stands by (a sessionRelay then carries what
// its agents say to the leader).
type agentFront struct {
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

// openAgentFront listens for agents. Its dispatcher and its handlers on
// informers' Clusters are added before they start; start serves.
func openAgentFront(ctx context.Context, cfg Config, hubCA *pki.CA, clients *kube.Clients, informers *controller.Informers,
	recorder controller.Recorder, backend agentBackend) (*agentFront, error) {
	logger := cfg.Logger
	cert, err := ca.ServingCertificate(hubCA, cfg.TLSSANs)
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
	f := &agentFront{}
	if f.udpConn, err = net.ListenUDP("udp", udpAddr); err != nil {
		return nil, fmt.Errorf("listen for agents on %s (UDP): %w", cfg.QUICAddr, err)
	}
	opened := false
	defer func() {
		if !opened {
			f.close()
		}
	}()
	if granted, err := growReceiveBuffer(f.udpConn, agentsReceiveBuffer); err != nil || granted < agentsReceiveBuffer {
		logger.Warn("the agents' UDP socket got a smaller receive buffer than asked: packets may be dropped while thousands of agents reconnect (raise net.core.rmem_max)",
			"asked", agentsReceiveBuffer, "granted", granted, "err", err)
	}
	handshakes := newHandshakeGate(cfg.MaxHandshakes)
	f.quic = &quic.Transport{Conn: f.udpConn, StatelessResetKey: resetKey, ConnContext: handshakes.admit}
	quicConf := protocol.QUICConfig()
	// An agent needs a control and a status stream (Work streams later);
	// a low limit bounds what one connection can make the hub buffer.
	quicConf.MaxIncomingStreams = 8
	quicConf.MaxIncomingUniStreams = -1
	if f.ln, err = f.quic.Listen(protocol.ServerTLSConfig(cert, ca.Pool(hubCA)), quicConf); err != nil {
		return nil, fmt.Errorf("listen for agents on %s (UDP): %w", cfg.QUICAddr, err)
	}
	agentsCtx, stopAgents := context.WithCancel(ctx)
	f.agentsCtx, f.stopAgents = agentsCtx, stopAgents
	if f.ws, err = listenWebSocket(agentsCtx, cfg.WebSocketAddr, f.udpConn.LocalAddr(), cert, ca.Pool(hubCA), handshakes, logger); err != nil {
		return nil, err
	}
	f.dispatcher = dispatch.New(clients, informers, recorder, cfg.Clock, logger)
	f.joins = join.New(clients, join.Config{CA: hubCA, CertTTL: cfg.AgentCertTTL, Approval: cfg.AgentCSRApproval, Wait: joinWait}, cfg.Clock, logger)
	f.agents = newAgentServer(backend, cfg.Health, f.dispatcher, f.joins, cfg.HubID, cfg.Clock, logger)
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

// start serves agents until goodbye (or the context openAgentFront had
// ends); the dispatcher runs until ctx ends.
func (f *agentFront) start(ctx context.Context) {
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

// goodbye tells every agent to go (each session's handler sends GoAway
// when the agents' context ends, while the listener still runs), waits
// for the sessions to end, then stops listening.
func (f *agentFront) goodbye() {
	f.stopAgents()
	f.servers.Wait()
	_ = f.ln.Close()
	if f.ws != nil {
		f.ws.close()
	}
}

// wsAddr is the WebSocket listener's address, "off" without one.
func (f *agentFront) wsAddr() string {
	if f.ws == nil {
		return "off"
	}
	return f.ws.Addr().String()
}

// close releases the sockets, after goodbye and once the dispatcher's
// context ended.
func (f *agentFront) close() {
	if f.stopAgents != nil {
		f.stopAgents()
	}
	f.background.Wait()
	if f.quic != nil {
		_ = f.quic.Close()
	}
	_ = f.udpConn.Close()
}
