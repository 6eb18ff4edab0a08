package netbed

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The kernels these tests run on have no netem qdisc, so a bed impairs an
// edge site's link on the router instead: random loss with iptables'
// statistic match, outages by taking the router's end of the link down.
// Both act on whatever crosses the link, in both directions.

// lossChain is the router's iptables chain of edge site i's loss rules;
// FORWARD jumps to it before anything else once SetLoss first runs.
func lossChain(i int) string { return "loss-lan" + strconv.Itoa(i) }

// lan is the router's end of edge site i's link.
func lan(i int) string { return "lan" + strconv.Itoa(i) }

// checkEdge refuses an edge site the bed does not have.
func (b *Bed) checkEdge(i int) error {
	if i < 1 || i > len(b.Edges) {
		return fmt.Errorf("netbed: edge site %d: the bed has sites 1 to %d", i, len(b.Edges))
	}
	return nil
}

// SetLoss makes the router drop each packet forwarded to or from edge site
// i (1-based) with probability percent/100, independently in each
// direction; 0 removes the loss.
func (b *Bed) SetLoss(ctx context.Context, i int, percent float64) error {
	if err := b.checkEdge(i); err != nil {
		return err
	}
	if percent < 0 || percent > 100 {
		return fmt.Errorf("netbed: loss %v%%: want 0 to 100", percent)
	}
	var rule []string
	if percent > 0 {
		p := strconv.FormatFloat(percent/100, 'f', 4, 64)
		rule = []string{"-m", "statistic", "--mode", "random", "--probability", p}
	}
	if err := b.setDropChain(ctx, i, lossChain(i), percent > 0, rule...); err != nil {
		return fmt.Errorf("netbed: loss on edge %d: %w", i, err)
	}
	return nil
}

// udpChain is the router's iptables chain that blocks UDP of edge site i.
func udpChain(i int) string { return "udp-lan" + strconv.Itoa(i) }

// BlockUDP makes the router drop all UDP forwarded to or from edge site i
// (as a firewall that lets only TCP out does), or lets it pass again.
func (b *Bed) BlockUDP(ctx context.Context, i int, blocked bool) error {
	if err := b.checkEdge(i); err != nil {
		return err
	}
	if err := b.setDropChain(ctx, i, udpChain(i), blocked, "-p", "udp"); err != nil {
		return fmt.Errorf("netbed: UDP on edge %d: %w", i, err)
	}
	return nil
}

// setDropChain makes the router's chain of edge site i hold one DROP rule
// matching match (drop true) or none. The chain is created on first use
// and jumped to ahead of the NAT's accept rules, for both directions of
// the link.
func (b *Bed) setDropChain(ctx context.Context, i int, chain string, drop bool, match ...string) error {
	ipt := func(args ...string) error {
		_, err := b.Router.Run(ctx, "iptables", append([]string{"-w"}, args...)...)
		return err
	}
	if _, err := b.Router.Run(ctx, "iptables", "-w", "-n", "-L", chain); err != nil {
		for _, args := range [][]string{
			{"-N", chain},
			{"-I", "FORWARD", "1", "-i", lan(i), "-j", chain},
			{"-I", "FORWARD", "1", "-o", lan(i), "-j", chain},
		} {
			if err := ipt(args...); err != nil {
				return err
			}
		}
	}
	if err := ipt("-F", chain); err != nil {
		return err
	}
	if !drop {
		return nil
	}
	return ipt(append(append([]string{"-A", chain}, match...), "-j", "DROP")...)
}

// Dropped is how many packets the loss of edge site i has dropped since
// SetLoss last set it.
func (b *Bed) Dropped(ctx context.Context, i int) (int, error) {
	if err := b.checkEdge(i); err != nil {
		return 0, err
	}
	out, err := b.Router.Run(ctx, "iptables", "-w", "-n", "-v", "-x", "-L", lossChain(i))
	if err != nil {
		return 0, fmt.Errorf("netbed: %w", err)
	}
	dropped := 0
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 2 && fields[2] == "DROP" {
			n, err := strconv.Atoi(fields[0])
			if err != nil {
				return 0, fmt.Errorf("netbed: iptables counters %q: %w", line, err)
			}
			dropped += n
		}
	}
	return dropped, nil
}

// SetLink takes edge site i's link down at the router or brings it back
// up. The kernel passes traffic on a link that came up only after its link
// watch ran, up to about a second later, so for outages of exact length
// use SetLoss with 100.
func (b *Bed) SetLink(ctx context.Context, i int, up bool) error {
	if err := b.checkEdge(i); err != nil {
		return err
	}
	state := "down"
	if up {
		state = "up"
	}
	if _, err := b.Router.Run(ctx, "ip", "link", "set", lan(i), state); err != nil {
		return fmt.Errorf("netbed: link of edge %d %s: %w", i, state, err)
	}
	return nil
}
