// Package netbed builds throw-away networks of Linux network namespaces for
// tests of Flotilla at the edge: a "cloud" namespace for the hub, a NAT
// router namespace that masquerades an edge LAN behind one public address,
// and one namespace per edge site for its agent.
//
//	cloud 198.51.100.2 ── wan0 198.51.100.1 [router, MASQUERADE] lanN 10.1.N.1 ── edge-N 10.1.N.2
//
// The cloud has no route into 10.1.0.0/16, and the router forwards nothing
// from its WAN side into the LAN unless it belongs to a connection the LAN
// side opened: as at a real edge site, only the agent can open a session.
// Each edge site has its own point-to-point link to the router (no bridge
// module needed); together they are the router's LAN.
//
// Processes run inside a namespace through `ip netns exec` (see
// Namespace.Command). Sockets are opened inside a namespace from the test
// process itself (Namespace.Listen, Namespace.Dial): Forward uses them to
// give a namespace a TCP port of another one, which is how an edge site
// reaches its member cluster's API server on the host's loopback and the
// test reaches the hub's API in the cloud.
//
// A bed's namespaces are named flnb<pid>-<random>-<role>. Everything it
// creates is removed by Close (New registers it with t.Cleanup); a test
// binary killed before its cleanup leaves namespaces whose pid is gone, and
// Sweep, which New runs first, removes those.
//
// It needs root, iproute2 (ip), iptables and conntrack; New fails with the
// missing piece named.
package netbed
