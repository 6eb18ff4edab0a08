// Package transport carries the agent protocol between an agent and the
// hub over one of two transports behind one connection interface: QUIC
// (UDP; streams and datagrams), and, where UDP is blocked, a WebSocket on
// TLS over TCP with the streams multiplexed by yamux (no datagrams: lease
// renewals then go on the control stream). The frames on the streams are
// the same on both.
package transport
