// Package netlimit bounds what peers that have not authenticated yet can
// hold of the hub: connections in total and per source address, with the
// source addresses grouped as an attacker would have to spread them (an
// IPv4 address, an IPv6 /64), and a log line that says so at a bounded
// rate.
//
// Nothing here keeps state per address beyond what is open: a source's
// count exists while it holds a connection (or a handshake) and goes with
// the last one, so the maps are bounded by the caps themselves however
// many addresses an attacker uses.
package netlimit
