// Package bootstraptoken keeps what an edge cluster joins the hub with, in the
// hub's Kubernetes API and in the formats kubeadm made familiar:
//
//   - bootstrap tokens: standard `bootstrap.kubernetes.io/token` Secrets
//     named bootstrap-token-<id> in kube-system, with token-id,
//     token-secret, expiration, description and
//     usage-bootstrap-authentication; a token may be bound to one cluster
//     name (label flotilla.io/cluster), and an unbound single-use one is
//     bound to the first name that joins with it; its use (label
//     flotilla.io/token-use) is once (the default: claimed by the request
//     it joins with, deleted once that is signed), reusable (any number of
//     new clusters) or replace (once, even a cluster that already joined);
//     and it carries the provider, region, zone and labels the hub
//     registers the joining cluster with (ClusterMetadata, data key
//     flotilla-cluster-metadata), which the agent does not choose;
//   - the hub's join information: the address agents dial and the pin of
//     the hub CA (sha256 of its public key, as kubeadm join's
//     --discovery-token-ca-cert-hash), in ConfigMap kube-public/flotilla-hub-info,
//     which the hub writes at start;
//   - the check a join makes of a presented token (Authenticate), with a
//     reason an operator can act on for every refusal;
//   - the helm command that joins an edge cluster (JoinCommand).
//
// The embedded API server does not authenticate requests with these
// tokens: they are good for joining over QUIC and nothing else.
package bootstraptoken
