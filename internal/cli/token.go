package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
)

func tokenCommand() *command {
	return &command{
		name:  "token",
		usage: "token create [--ttl DURATION] [--cluster NAME [--replace]] [--reusable] [--description TEXT] [--provider P] [--region R] [--zone Z] [--label KEY=VALUE]... | token list [-o wide|json|yaml] | token delete ID|TOKEN...",
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

The hub registers the Cluster that joins with the token's --provider,
--region, --zone and --label KEY=VALUE (repeatable), never with what the
joining agent asks for: that would let an edge site place itself into the
selectors of policies (those that place Secrets) or into a zone of its
choosing. The agent may set only labels under agent.flotilla.io/; the hub
ignores the rest of what it asks for and records an AgentMetadataIgnored
event on the Cluster. A join of a Cluster that exists (--replace) adds
or changes what the token sets and removes nothing.

list prints the tokens by ID (not their secrets), with their time left, use
and cluster; -o wide adds what they register the Cluster with. delete removes tokens by ID or whole token: no new join can use
them (clusters that already joined keep their certificates).

Tokens are standard bootstrap.kubernetes.io/token Secrets in the hub's
kube-system namespace (RBAC: create, list and delete of secrets there;
ClusterRole flotilla-admin grants it); the hub's audit log records who
created each. flotilla-hub token create does the same on the hub's machine
with DATA/admin.kubeconfig.`,
		example: `  flotilla token create --cluster edge-1 --description "store 7"
  flotilla token create --cluster edge-1 --region eu-west-1 --zone eu-west-1a --label tier=edge
  flotilla token create --cluster edge-1 --replace
  flotilla token create --reusable --ttl 8h --description "rollout wave 3"
  flotilla token create --token-only
  flotilla token list -o wide
  flotilla token delete abcdef
`,
		bind: bindToken,
	}
}

type tokenOptions struct {
	create     bootstraptoken.CreateOptions
	labels     []string
	hubAddress string
	tokenOnly  bool
	output     string
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
	fs.StringVar(&o.create.Metadata.Provider, "provider", "", "create: the `PROVIDER` (e.g. aws) the hub registers the joining cluster with (a label value); the agent's own --cluster-provider is ignored")
	fs.StringVar(&o.create.Metadata.Region, "region", "", "create: the `REGION` the hub registers the joining cluster with (a label value); the agent's own --cluster-region is ignored")
	fs.StringVar(&o.create.Metadata.Zone, "zone", "", "create: the `ZONE` the hub registers the joining cluster with (a label value): failover's per-zone eviction rate counts it there; the agent's own --cluster-zone is ignored")
	fs.StringArrayVar(&o.labels, "label", nil, "create: a label `KEY=VALUE` for the joining cluster's Cluster (repeatable; not under agent.flotilla.io/, the only prefix the agent may set itself)")
	fs.StringVarP(&o.output, "output", "o", "", "list: output `FORMAT`: wide (with what each token registers), json or yaml (default a table)")
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
		if err := o.parseLabels(); err != nil {
			return inv.usagef("%v", err)
		}
		if err := o.create.Validate(); err != nil {
			return inv.usagef("%v", err)
		}
		return o.createToken(ctx, inv)
	case "list":
		if len(rest) > 0 {
			return inv.usagef("token list takes no arguments, got %q", rest)
		}
		format, err := parseOutput(o.output)
		if err != nil {
			return inv.usagef("%v", err)
		}
		return listTokens(ctx, inv, format)
	case "delete":
		if len(rest) == 0 {
			return inv.usagef("token delete needs the ID or the whole token of at least one token")
		}
		return deleteTokens(ctx, inv, rest)
	default:
		return inv.usagef("unknown token command %q: expected create, list or delete", verb)
	}
}

// parseLabels reads the --label flags into the token's metadata.
func (o *tokenOptions) parseLabels() error {
	if len(o.labels) == 0 {
		return nil
	}
	o.create.Metadata.Labels = map[string]string{}
	for _, kv := range o.labels {
		if err := bootstraptoken.ParseLabel(o.create.Metadata.Labels, kv); err != nil {
			return err
		}
	}
	return nil
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
	fmt.Fprintf(inv.Stdout, "token %s created: %s, %s\n", t, expiryText(t), clusterText(t))
	if m := t.Metadata.String(); m != "" {
		fmt.Fprintf(inv.Stdout, "the hub registers the cluster with %s\n", m)
	}
	fmt.Fprintln(inv.Stdout)
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

func listTokens(ctx context.Context, inv *invocation, format outputFormat) error {
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
	if format == outputJSON || format == outputYAML {
		return writeTokens(inv.Stdout, tokens, format)
	}
	if len(tokens) == 0 {
		fmt.Fprintln(inv.Stderr, "No bootstrap tokens.")
		return nil
	}
	now := inv.Now()
	tab := &table{header: []string{"ID", "TTL", "EXPIRES", "USE", "CLUSTER", "AGE", "DESCRIPTION"}}
	if format == outputWide {
		tab.header = append(tab.header, "PROVIDER", "REGION", "ZONE", "LABELS")
	}
	for _, t := range tokens {
		ttl, expires := "<forever>", "<never>"
		if !t.Expires.IsZero() {
			expires = t.Expires.UTC().Format(time.RFC3339)
			ttl = "<expired>"
			if left := t.Expires.Sub(now); left > 0 {
				ttl = duration.ShortHumanDuration(left)
			}
		}
		row := []string{t.ID, ttl, expires, tokenUse(t), orNone(t.Cluster), age(now, t.Created), orNone(oneLine(t.Description))}
		if format == outputWide {
			m := t.Metadata
			row = append(row, orNone(m.Provider), orNone(m.Region), orNone(m.Zone), orNone(m.LabelsText()))
		}
		tab.add(row...)
	}
	return tab.write(inv.Stdout)
}

func tokenUse(t bootstraptoken.Token) string {
	if t.UsedBy != "" {
		return "used"
	}
	return t.Use()
}

// tokenView is a token as list -o json or yaml shows it: never its secret.
type tokenView struct {
	ID          string                          `json:"id"`
	Use         string                          `json:"use"`
	UsedBy      string                          `json:"usedBy,omitempty"`
	Cluster     string                          `json:"cluster,omitempty"`
	Expires     *time.Time                      `json:"expires,omitempty"`
	Created     time.Time                       `json:"created"`
	Description string                          `json:"description,omitempty"`
	Registers   *bootstraptoken.ClusterMetadata `json:"registers,omitempty"`
}

// writeTokens prints tokens as a JSON or YAML list of tokenView.
func writeTokens(w io.Writer, tokens []bootstraptoken.Token, format outputFormat) error {
	views := make([]tokenView, 0, len(tokens))
	for _, t := range tokens {
		v := tokenView{ID: t.ID, Use: t.Use(), UsedBy: t.UsedBy, Cluster: t.Cluster, Created: t.Created.UTC(), Description: t.Description}
		if !t.Expires.IsZero() {
			at := t.Expires.UTC()
			v.Expires = &at
		}
		if !t.Metadata.IsZero() {
			v.Registers = &t.Metadata
		}
		views = append(views, v)
	}
	raw, err := json.Marshal(views)
	if err != nil {
		return fmt.Errorf("encoding tokens: %w", err)
	}
	return writeRaw(w, raw, format)
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
