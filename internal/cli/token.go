package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
)

func tokenCommand() *command {
	return &command{
		name:  "token",
		usage: "token create [--ttl DURATION] [--cluster NAME [--replace]] [--reusable] [--description TEXT] | token list | token delete ID|TOKEN...",
		short: "Create, list and delete the bootstrap tokens edge clusters join with",
		long: `Manage bootstrap tokens, with which an edge cluster's agent joins the hub.

create makes a token (kubeadm's format, ID.SECRET) and prints it with the
helm command that installs the agent into an edge cluster: the hub's address
for agents and the pin of the hub CA (sha256 of its public key, as kubeadm
join's --discovery-token-ca-cert-hash), as the hub published them. The agent
trusts the hub by that pin alone, sends the token and a certificate request,
and gets its certificate.

A token joins one new cluster, once: the hub deletes it as soon as it has
signed that join's certificate. It lasts --ttl (default 1h: make it right
before the install it is for). With --cluster it joins only that cluster
name; without, the first cluster that joins with it binds it to its name.
A cluster that has joined keeps its name: a join under a name whose agent
already holds a certificate is refused, unless the token was made with
--cluster NAME --replace (re-installing that cluster's agent: the new
certificate supersedes the old one, whose sessions are cut; the hub records
an AgentCertificateReplaced event on the Cluster). --reusable makes a token
for provisioning many new clusters: it joins any number of them, is not
used up, never binds, never replaces; only a reusable token may have
--ttl 0 (never expires; delete it when provisioning ends).

list prints the tokens by ID (not their secrets), with their time left, use
and cluster. delete removes tokens by ID or whole token: no new join can use
them (clusters that already joined keep their certificates).

Tokens are standard bootstrap.kubernetes.io/token Secrets in the hub's
kube-system namespace (RBAC: create, list and delete of secrets there;
ClusterRole flotilla-admin grants it); the hub's audit log records who
created each. flotilla-hub token create does the same on the hub's machine
with DATA/admin.kubeconfig.`,
		example: `  flotilla token create --cluster edge-1 --description "store 7"
  flotilla token create --cluster edge-1 --replace
  flotilla token create --reusable --ttl 8h --description "rollout wave 3"
  flotilla token create --token-only
  flotilla token list
  flotilla token delete abcdef
`,
		bind: bindToken,
	}
}

type tokenOptions struct {
	create     bootstraptoken.CreateOptions
	hubAddress string
	tokenOnly  bool
}

func bindToken(fs *pflag.FlagSet) runFunc {
	o := &tokenOptions{}
	fs.DurationVar(&o.create.TTL, "ttl", bootstraptoken.DefaultTTL, "create: how long the token can be used to join, as a `DURATION` (0: until deleted, with --reusable only)")
	fs.StringVar(&o.create.Cluster, "cluster", "", "create: the only cluster `NAME` the token joins (default: the first to join with it)")
	fs.BoolVar(&o.create.Replace, "replace", false, "create: with --cluster, the token may join that cluster although it already joined: the new agent certificate supersedes the old one (re-installing its agent); recorded as an event on the Cluster")
	fs.BoolVar(&o.create.Reusable, "reusable", false, "create: the token joins any number of new clusters until it expires (provisioning many), instead of one; it never joins a cluster that already joined")
	fs.StringVar(&o.create.Description, "description", "", "create: free `TEXT` kept with the token, shown by list")
	fs.StringVar(&o.hubAddress, "hub-address", "", "create: the `HOST:PORT` agents dial, in the printed command (default the address the hub published: its --agent-address)")
	fs.BoolVar(&o.tokenOnly, "token-only", false, "create: print only the token")
	return o.run
}

func (o *tokenOptions) run(ctx context.Context, inv *invocation, args []string) error {
	if len(args) == 0 {
		return inv.usagef("expected create, list or delete")
	}
	switch verb, rest := args[0], args[1:]; verb {
	case "create":
		if len(rest) > 0 {
			return inv.usagef("token create takes no arguments, got %q", rest)
		}
		if err := o.create.Validate(); err != nil {
			return inv.usagef("%v", err)
		}
		return o.createToken(ctx, inv)
	case "list":
		if len(rest) > 0 {
			return inv.usagef("token list takes no arguments, got %q", rest)
		}
		return listTokens(ctx, inv)
	case "delete":
		if len(rest) == 0 {
			return inv.usagef("token delete needs the ID or the whole token of at least one token")
		}
		return deleteTokens(ctx, inv, rest)
	default:
		return inv.usagef("unknown token command %q: expected create, list or delete", verb)
	}
}

func (o *tokenOptions) createToken(ctx context.Context, inv *invocation) error {
	c, err := inv.clients()
	if err != nil {
		return err
	}
	// Read first: a hub that cannot say how to reach it makes no token.
	info, err := bootstraptoken.ReadInfo(ctx, c.kube)
	if err != nil {
		return err
	}
	if o.hubAddress != "" {
		info.AgentAddress = o.hubAddress
	}
	t, err := bootstraptoken.Create(ctx, c.kube, o.create, inv.Now())
	if err != nil {
		return err
	}
	if o.tokenOnly {
		fmt.Fprintln(inv.Stdout, t)
		return nil
	}
	fmt.Fprintf(inv.Stdout, "token %s created: %s, %s\n\n", t, expiryText(t), clusterText(t))
	fmt.Fprintf(inv.Stdout, "Join an edge cluster: with kubectl and helm pointed at it, from a checkout of Flotilla, run\n\n    %s", bootstraptoken.JoinCommand(info, t))
	return nil
}

func expiryText(t bootstraptoken.Token) string {
	if t.Expires.IsZero() {
		return "never expires"
	}
	return "expires " + t.Expires.UTC().Format(time.RFC3339)
}

func clusterText(t bootstraptoken.Token) string {
	switch {
	case t.Reusable && t.Cluster == "":
		return "joins any number of new clusters"
	case t.Reusable:
		return "joins only cluster " + t.Cluster + ", while it has not joined"
	case t.Replace:
		return "joins only cluster " + t.Cluster + ", once, replacing its agent certificate"
	case t.Cluster == "":
		return "joins once, the first new cluster that uses it"
	}
	return "joins only cluster " + t.Cluster + ", once"
}

func listTokens(ctx context.Context, inv *invocation) error {
	c, err := inv.clients()
	if err != nil {
		return err
	}
	tokens, bad, err := bootstraptoken.List(ctx, c.kube)
	if err != nil {
		return err
	}
	for _, e := range bad {
		fmt.Fprintf(inv.Stderr, "warning: %v\n", e)
	}
	if len(tokens) == 0 {
		fmt.Fprintln(inv.Stderr, "No bootstrap tokens.")
		return nil
	}
	now := inv.Now()
	tab := &table{header: []string{"ID", "TTL", "EXPIRES", "USE", "CLUSTER", "AGE", "DESCRIPTION"}}
	for _, t := range tokens {
		ttl, expires := "<forever>", "<never>"
		if !t.Expires.IsZero() {
			expires = t.Expires.UTC().Format(time.RFC3339)
			ttl = "<expired>"
			if left := t.Expires.Sub(now); left > 0 {
				ttl = duration.ShortHumanDuration(left)
			}
		}
		use := t.Use()
		if t.UsedBy != "" {
			use = "used"
		}
		tab.add(t.ID, ttl, expires, use, orNone(t.Cluster), age(now, t.Created), orNone(oneLine(t.Description)))
	}
	return tab.write(inv.Stdout)
}

func deleteTokens(ctx context.Context, inv *invocation, ids []string) error {
	c, err := inv.clients()
	if err != nil {
		return err
	}
	failed := 0
	for _, arg := range ids {
		id, err := bootstraptoken.Delete(ctx, c.kube, arg)
		if err != nil {
			fmt.Fprintf(inv.Stderr, "error: %v\n", err)
			failed++
			continue
		}
		fmt.Fprintf(inv.Stdout, "bootstrap token %s deleted\n", id)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d tokens not deleted", failed, len(ids))
	}
	return nil
}
