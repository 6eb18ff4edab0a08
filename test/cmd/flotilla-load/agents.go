package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/agent"
	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/hub/join"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// simAgent is a simulated agent: a real QUIC connection with a real client
// certificate, lease renewals at the agreed interval and synthetic status.
type simAgent struct {
	name    string
	serial  *big.Int // of its certificate, registered with the hub
	tlsConf *tls.Config
	cancel  context.CancelFunc
	done    chan struct{}
	acks    atomic.Int64
	// lastRenewal is the hub's stamp (unix nanoseconds) on the last
	// renewal it acknowledged: the exact instant its Ready decision counts
	// from. The API's Lease may be older (leases are written in batches).
	lastRenewal atomic.Int64
	// welcomedAt is when the hub last welcomed it (unix nanoseconds).
	welcomedAt atomic.Int64
}

// fleet is the set of simulated agents, spread over a few UDP sockets.
type fleet struct {
	hubAddr       string
	transports    []*quic.Transport
	agents        []*simAgent
	statusChange  time.Duration // how often an agent's status changes
	leaseDuration time.Duration
	errors        atomic.Int64
	// handshakeRetries counts handshakes that failed and were tried again.
	handshakeRetries atomic.Int64
	// redials counts sessions dialled again after a welcomed one ended.
	redials atomic.Int64
	// busy counts dials the hub refused as busy (too many handshakes).
	busy atomic.Int64
}

// newFleet makes count agents with certificates of agentCA that trust
// hubCA, sharing sockets UDP sockets.
func newFleet(hubAddr string, hubCA, agentCA *pki.CA, count, sockets int, leaseDuration, statusChange time.Duration) (*fleet, error) {
	f := &fleet{hubAddr: hubAddr, leaseDuration: leaseDuration, statusChange: statusChange}
	for range sockets {
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		f.transports = append(f.transports, &quic.Transport{Conn: conn})
	}
	roots := x509.NewCertPool()
	roots.AddCert(hubCA.Cert)
	for i := range count {
		name := fmt.Sprintf("load-%05d", i)
		kp, err := agentCA.Issue(pki.Request{CommonName: protocol.ClusterCommonName(name), Usage: pki.ClientAuth, ValidFor: 24 * time.Hour})
		if err != nil {
			return nil, err
		}
		cert, err := kp.TLSCertificate()
		if err != nil {
			return nil, err
		}
		parsed, err := kp.Certificate()
		if err != nil {
			return nil, err
		}
		f.agents = append(f.agents, &simAgent{name: name, serial: parsed.SerialNumber, tlsConf: protocol.ClientTLSConfig(cert, roots, "127.0.0.1")})
	}
	return f, nil
}

// connect starts every agent, at most parallel handshakes at a time, and
// returns once all got their welcome.
func (f *fleet) connect(ctx context.Context, parallel int, progress func(done int)) error {
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var connected atomic.Int64
	errs := make(chan error, len(f.agents))
	for i, a := range f.agents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f.connectOne(ctx, a, f.transports[i%len(f.transports)]); err != nil {
				errs <- fmt.Errorf("%s: %w", a.name, err)
				return
			}
			if n := connected.Add(1); n%500 == 0 {
				progress(int(n))
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when every agent connected
}

// handshakeAttempts is how often an agent tries to connect before the
// run fails: as real agents, a failed handshake (the hub busy with
// thousands of others) is tried again after a back-off, and counted.
const handshakeAttempts = 5

// connectOne starts a's session and returns once it got its welcome,
// trying again after 1, 2, 4... s when a handshake fails.
func (f *fleet) connectOne(ctx context.Context, a *simAgent, tr *quic.Transport) error {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		welcomed := make(chan error, 1)
		agentCtx, cancel := context.WithCancel(ctx)
		a.cancel, a.done = cancel, make(chan struct{})
		go func() {
			defer close(a.done)
			if f.run(agentCtx, a, tr, welcomed) {
				f.redial(agentCtx, a, tr)
			}
		}()
		err := <-welcomed
		if err == nil {
			return nil
		}
		cancel()
		<-a.done
		if attempt == handshakeAttempts {
			return fmt.Errorf("%d handshakes failed, the last: %w", attempt, err)
		}
		f.handshakeRetries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// redial keeps a's sessions going after its first one ended, until ctx
// ends: what a fleet does when its hub restarts. It waits between dials as
// real agents do (agent.Redialer).
func (f *fleet) redial(ctx context.Context, a *simAgent, tr *quic.Transport) {
	r := agent.NewRedialer(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	var err error // why the last dial failed; nil after a welcomed session
	welcomedAt := time.Unix(0, a.welcomedAt.Load())
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.Delay(err, welcomedAt, time.Now())):
		}
		f.redials.Add(1)
		dialed := make(chan error, 1)
		if f.run(ctx, a, tr, dialed) {
			err, welcomedAt = nil, time.Unix(0, a.welcomedAt.Load())
			continue
		}
		err, welcomedAt = <-dialed, time.Time{}
		if agent.HubBusy(err) {
			f.busy.Add(1)
		}
	}
}

// run is one agent's session: hello, welcome, then renewals and status
// until ctx or the connection ends; it reports whether the hub welcomed
// it. Stopping it abruptly (ctx) models a crashed agent: no goodbye is
// sent, the hub only sees the renewals stop.
func (f *fleet) run(ctx context.Context, a *simAgent, tr *quic.Transport, welcomed chan<- error) bool {
	conn, err := tr.Dial(ctx, udpAddr(f.hubAddr), a.tlsConf, protocol.QUICConfig())
	if err != nil {
		welcomed <- err
		return false
	}
	defer conn.CloseWithError(protocol.CloseNormal, "load agent stopped")
	control, err := conn.OpenStreamSync(ctx)
	if err == nil {
		err = protocol.WriteStreamKind(control, protocol.StreamControl)
	}
	if err == nil {
		err = protocol.WriteMessage(control, &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: a.name, AgentVersion: "load", LeaseDurationSeconds: int32(f.leaseDuration / time.Second)})
	}
	if err != nil {
		welcomed <- err
		return false
	}
	reader := protocol.NewReader(control, 0)
	msg, err := reader.ReadMessage()
	welcome, ok := msg.(*protocol.Welcome)
	if err != nil || !ok {
		welcomed <- fmt.Errorf("no welcome: %v %v", err, msg)
		return false
	}
	a.welcomedAt.Store(time.Now().UnixNano())
	welcomed <- nil
	ack := func(msg protocol.Message) {
		if ack, ok := msg.(*protocol.LeaseAck); ok {
			a.lastRenewal.Store(ack.HubTime.UnixNano())
		}
		a.acks.Add(1)
	}
	go func() { // acks on the control stream; any read error ends the reading
		for {
			msg, err := reader.ReadMessage()
			if err != nil {
				return
			}
			ack(msg)
		}
	}()
	datagrams := conn.ConnectionState().SupportsDatagrams.Remote
	if datagrams { // as real agents: renewals and acks as datagrams
		go func() {
			for {
				b, err := conn.ReceiveDatagram(ctx)
				if err != nil {
					return
				}
				if msg, err := protocol.DecodeDatagram(b); err == nil {
					ack(msg)
				}
			}
		}()
	}
	status, err := conn.OpenStreamSync(ctx)
	if err == nil {
		err = protocol.WriteStreamKind(status, protocol.StreamStatus)
	}
	if err != nil {
		f.errors.Add(1)
		return true
	}
	renewOn := func(m *protocol.LeaseRenew) error { return protocol.WriteMessage(control, m) }
	if datagrams {
		renewOn = func(m *protocol.LeaseRenew) error { return protocol.SendDatagram(conn, m) }
	}
	f.loop(ctx, conn.Context(), a, renewOn, status, time.Duration(welcome.RenewIntervalMillis)*time.Millisecond)
	return true
}

// loop renews and reports on jittered tickers, like real agents whose
// start times are spread out, until ctx or the connection (connCtx) ends.
// As real agents, it reports status at the start of a session and then
// when the status changed (every statusChange here, never if 0), or when
// it has been the same for agent.UnchangedReportEvery.
func (f *fleet) loop(ctx, connCtx context.Context, a *simAgent, renewOn func(*protocol.LeaseRenew) error, status *quic.Stream, renewEvery time.Duration) {
	renew := time.NewTimer(time.Duration(rand.Int64N(int64(renewEvery))))
	defer renew.Stop()
	report := time.NewTimer(0)
	defer report.Stop()
	reportEvery, change := agent.UnchangedReportEvery, 0
	if f.statusChange > 0 {
		reportEvery, change = min(f.statusChange, agent.UnchangedReportEvery), 1
	}
	var seq uint64
	var reports int
	for {
		select {
		case <-ctx.Done():
			return
		case <-connCtx.Done():
			f.errors.Add(1)
			return
		case <-renew.C:
			seq++
			if err := renewOn(&protocol.LeaseRenew{Seq: seq, AgentTime: time.Now()}); err != nil {
				f.errors.Add(1)
				return
			}
			renew.Reset(renewEvery)
		case <-report.C:
			if err := protocol.WriteMessage(status, syntheticStatus(reports*change)); err != nil {
				f.errors.Add(1)
				return
			}
			next := reportEvery
			if reports == 0 { // spread the fleet's reports out
				next = time.Duration(rand.Int64N(int64(reportEvery))) + 1
			}
			reports++
			report.Reset(next)
		}
	}
}

// syntheticStatus is an agent's n-th report: a pod more or fewer each time.
func syntheticStatus(n int) *protocol.ClusterStatus {
	return &protocol.ClusterStatus{
		ObservedAt: time.Now(), KubernetesVersion: "v1.37.2", APIServerHealthy: true, HealthMessage: "ok",
		NodesTotal: 3, NodesReady: 3,
		Allocatable: map[string]string{"cpu": "24", "memory": "96Gi", "pods": "330"},
		Allocated:   map[string]string{"cpu": "3", "memory": "8Gi", "pods": strconv.Itoa(12 + n%2)},
	}
}

func udpAddr(hostPort string) *net.UDPAddr {
	addr, err := net.ResolveUDPAddr("udp", hostPort)
	if err != nil {
		return &net.UDPAddr{}
	}
	return addr
}

// stop ends the sessions of the given agents at once and waits for them.
func stopAgents(agents []*simAgent) {
	for _, a := range agents {
		a.cancel()
	}
	for _, a := range agents {
		<-a.done
	}
}

func (f *fleet) close() {
	stopAgents(f.agents)
	for _, tr := range f.transports {
		tr.Close()
	}
}

// register registers every agent's cluster with the hub, as certs issue
// does (sessions need a registered cluster), workers at a time.
func (f *fleet) register(ctx context.Context, client flotillaclient.Interface, workers int) error {
	names := make(chan *simAgent)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for a := range names {
				if err := join.RecordSerial(ctx, client, a.name, a.serial, join.Registration{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for _, a := range f.agents {
		select {
		case names <- a:
		case err = <-errs:
			break feed
		}
	}
	close(names)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}
