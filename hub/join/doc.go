// Package join lets an edge cluster's agent join the hub with a bootstrap
// token, in the way kubelet TLS bootstrap does for nodes:
//
//  1. The agent, trusting the hub only by its CA pin, opens a join
//     connection (protocol.JoinALPN) and sends its cluster name, token,
//     a certificate request for CommonName cluster:<name> and
//     registration metadata (Server.Serve).
//  2. The hub checks the token (package bootstraptoken) and the request,
//     refuses a name that already joined (its Cluster records a serial)
//     unless the token was made to replace exactly that cluster, binds an
//     unbound single-use token to the name, and creates a certificates.k8s.io/v1
//     CertificateSigningRequest for signer flotilla.io/agent, labelled with
//     the cluster and annotated with the token ID and the Registration:
//     the provider, region, zone and labels the token was made with, and
//     only those labels the agent asked for under agent.flotilla.io/
//     (protocol.AgentLabelPrefix), as NodeRestriction limits a kubelet;
//     the rest of what the agent asked for is ignored, logged and, once
//     the Cluster is registered, an AgentMetadataIgnored event on it.
//  3. The Controller approves it when its token is still valid for that
//     cluster (--agent-csr-approval=auto; with manual, an operator runs
//     kubectl certificate approve), or denies it when the token is not.
//  4. Once approved, the Controller signs it with the hub CA for
//     --agent-cert-ttl (at most the request's expirationSeconds): the
//     certificate names the cluster and nothing else, whatever the request
//     asked for. Before it writes the certificate, it records the serial
//     on the Cluster (annotation flotilla.io/agent-certificate-serial),
//     creating the Cluster with the Registration if it is new (an
//     existing one gets what the Registration sets, and loses nothing); the
//     token is marked used before, the name checked again in that write,
//     and a single-use token deleted once the certificate is stored.
//  5. The join answers with the certificate and the CA, or, if approval
//     takes longer than the join may wait, with Pending and how to approve
//     it: the agent joins again with the same key and finds its request
//     (a signed one even though its token is gone).
package join
