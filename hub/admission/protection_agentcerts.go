package admission

import (
	"fmt"
	"maps"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/kubernetes/pkg/apis/certificates"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// What only the hub may write, whoever else asks, system:masters included
// (the admin kubeconfig is in it): RBAC cannot say it, since it would take
// create on CertificateSigningRequests or update on Clusters away from
// users who need them for other signers or for labels and taints.
//
//   - CertificateSigningRequests for signer flotilla.io/agent: the hub
//     creates them itself once an agent proved its identity, by a
//     bootstrap token (a join) or its current certificate (a renewal over
//     its session), and approves renewals in every approval mode. A request
//     anyone else created, or whose labels and annotations (the cluster,
//     the token, the renewed serial) anyone else changed, could have an
//     agent certificate signed for any cluster.
//   - The annotations of a Cluster that name the agent certificates it
//     accepts (v1alpha1.AgentCertificateAnnotations): set, changed or
//     removed by hand, they would let an old or foreign certificate in, or
//     lock the agent out.
var (
	csrResource     = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests").GroupResource()
	clusterResource = v1alpha1.SchemeGroupVersion.WithResource("clusters").GroupResource()
)

// agentCertRefusal is why a, by someone other than the hub, is refused, or
// "" when it may go on.
func (p *Protection) agentCertRefusal(a admission.Attributes) string {
	if isUser(a.GetUserInfo(), p.hubUser) {
		return ""
	}
	switch a.GetResource().GroupResource() {
	case csrResource:
		return csrRefusal(a, p.hubUser)
	case clusterResource:
		return serialRefusal(a, p.hubUser)
	}
	return ""
}

// csrRefusal refuses the creation of a request for the agents' signer, and
// changes of its labels or annotations.
func csrRefusal(a admission.Attributes, hubUser string) string {
	if signerOf(a.GetObject()) != v1alpha1.AgentSignerName && signerOf(a.GetOldObject()) != v1alpha1.AgentSignerName {
		return ""
	}
	switch a.GetOperation() {
	case admission.Create:
		return fmt.Sprintf("certificate requests for signer %s are the Flotilla hub's: only the hub (user %s) creates them, for an agent that joins "+
			"with a bootstrap token or renews its certificate over its session. To add a cluster, create a token (flotilla token create) and start its agent with it",
			v1alpha1.AgentSignerName, hubUser)
	case admission.Update:
		if !metadataChanged(a) {
			return "" // approving, denying or signing
		}
		return fmt.Sprintf("the labels and annotations of a certificate request for signer %s say which cluster, token or certificate it is for: "+
			"only the hub (user %s) sets them. Approve or deny it (kubectl certificate approve|deny) without changing them", v1alpha1.AgentSignerName, hubUser)
	}
	return ""
}

// serialRefusal refuses a Cluster created with, or changed in, the
// annotations that name its agent certificates.
func serialRefusal(a admission.Attributes, hubUser string) string {
	if a.GetOperation() != admission.Create && a.GetOperation() != admission.Update {
		return ""
	}
	old, cur := certificateAnnotations(a.GetOldObject()), certificateAnnotations(a.GetObject())
	if maps.Equal(old, cur) {
		return ""
	}
	return fmt.Sprintf("annotations %s of a Cluster name the agent certificates it accepts: only the hub (user %s) writes them, when it issues one. "+
		"To give the cluster a new certificate, run flotilla-hub certs issue on the hub, or join its agent with a token "+
		"(flotilla token create --cluster NAME --replace); to revoke its certificates, delete the Cluster",
		strings.Join(v1alpha1.AgentCertificateAnnotations, ", "), hubUser)
}

// certificateAnnotations are obj's annotations of AgentCertificateAnnotations
// (none for nil).
func certificateAnnotations(obj any) map[string]string {
	m, err := meta.Accessor(obj)
	if obj == nil || err != nil {
		return nil
	}
	found := map[string]string{}
	for _, key := range v1alpha1.AgentCertificateAnnotations {
		if v, ok := m.GetAnnotations()[key]; ok {
			found[key] = v
		}
	}
	return found
}

// metadataChanged: an update changes the object's labels or annotations.
func metadataChanged(a admission.Attributes) bool {
	cur, err1 := meta.Accessor(a.GetObject())
	old, err2 := meta.Accessor(a.GetOldObject())
	if err1 != nil || err2 != nil {
		return true // cannot tell: refuse
	}
	return !maps.Equal(cur.GetLabels(), old.GetLabels()) || !maps.Equal(cur.GetAnnotations(), old.GetAnnotations())
}

// signerOf is the signer of a certificate request (the objects admission
// sees are the API server's internal ones), "" for anything else.
func signerOf(obj any) string {
	switch csr := obj.(type) {
	case *certificates.CertificateSigningRequest:
		return csr.Spec.SignerName
	case *certificatesv1.CertificateSigningRequest:
		return csr.Spec.SignerName
	}
	return ""
}

// isUser: u is the user called name.
func isUser(u user.Info, name string) bool {
	return u != nil && name != "" && u.GetName() == name
}
