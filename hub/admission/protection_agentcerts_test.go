package admission

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/kubernetes/pkg/apis/certificates"
)

// TestProtectionOfAgentCertificateRequests (the attack of a CSR creator): only the
// hub creates certificate requests for signer flotilla.io/agent and sets
// their labels and annotations; approving them, and requests for other
// signers, are anyone's whom RBAC lets.
func TestProtectionOfAgentCertificateRequests(t *testing.T) {
	kind := certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest")
	csr := func(signer string, labels, annotations map[string]string, approved bool) runtime.Object {
		c := &certificates.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent-victim-1", Labels: labels, Annotations: annotations},
			Spec:       certificates.CertificateSigningRequestSpec{SignerName: signer},
		}
		if approved {
			c.Status.Conditions = []certificates.CertificateSigningRequestCondition{{Type: certificates.CertificateApproved}}
		}
		return c
	}
	victim := map[string]string{"flotilla.io/cluster": "victim"}
	renewal := map[string]string{"flotilla.io/renewal-of": "abc"}
	token := map[string]string{"flotilla.io/bootstrap-token-id": "abcdef"}
	sa := &user.DefaultInfo{Name: "system:serviceaccount:default:csr-maker", Groups: []string{"system:serviceaccounts", user.AllAuthenticated}}
	const (
		createRefusal = `certificatesigningrequests.certificates.k8s.io "flotilla-agent-victim-1" is forbidden: certificate requests for signer flotilla.io/agent ` +
			`are the Flotilla hub's: only the hub (user flotilla:hub) creates them, for an agent that joins with a bootstrap token or renews its certificate ` +
			`over its session. To add a cluster, create a token (flotilla token create) and start its agent with it; %s is not the hub`
		updateRefusal = `certificatesigningrequests.certificates.k8s.io "flotilla-agent-victim-1" is forbidden: the labels and annotations of a certificate ` +
			`request for signer flotilla.io/agent say which cluster, token or certificate it is for: only the hub (user flotilla:hub) sets them. ` +
			`Approve or deny it (kubectl certificate approve|deny) without changing them; %s is not the hub`
	)
	tests := []struct {
		name     string
		op       admission.Operation
		sub      string
		obj, old runtime.Object
		user     user.Info
		want     string // the refusal; "" = admitted
	}{
		{name: "ServiceAccount creates a renewal", op: admission.Create, obj: csr("flotilla.io/agent", victim, renewal, false), user: sa,
			want: fmt.Sprintf(createRefusal, `user "system:serviceaccount:default:csr-maker"`)},
		{name: "system:masters creates a join", op: admission.Create, obj: csr("flotilla.io/agent", victim, token, false), user: admin,
			want: fmt.Sprintf(createRefusal, `user "flotilla:admin"`)},
		{name: "anonymous creates one", op: admission.Create, obj: csr("flotilla.io/agent", nil, nil, false), user: &user.DefaultInfo{},
			want: fmt.Sprintf(createRefusal, "the anonymous requester")},
		{name: "the hub creates a renewal", op: admission.Create, obj: csr("flotilla.io/agent", victim, renewal, false), user: hubUser},
		{name: "operator creates a request of another signer", op: admission.Create, obj: csr("kubernetes.io/kube-apiserver-client", victim, renewal, false)},
		{name: "operator approves a join", op: admission.Update, sub: "approval",
			obj: csr("flotilla.io/agent", victim, token, true), old: csr("flotilla.io/agent", victim, token, false)},
		{name: "operator turns a join into a renewal while approving it", op: admission.Update, sub: "approval",
			obj: csr("flotilla.io/agent", victim, renewal, true), old: csr("flotilla.io/agent", victim, token, false),
			want: fmt.Sprintf(updateRefusal, `user "otto"`)},
		{name: "system:masters relabels a request", op: admission.Update,
			obj: csr("flotilla.io/agent", map[string]string{"flotilla.io/cluster": "other"}, token, false), old: csr("flotilla.io/agent", victim, token, false),
			user: admin, want: fmt.Sprintf(updateRefusal, `user "flotilla:admin"`)},
		{name: "the hub marks a request failed", op: admission.Update, sub: "status",
			obj: csr("flotilla.io/agent", victim, renewal, false), old: csr("flotilla.io/agent", victim, renewal, false), user: hubUser},
		{name: "operator relabels a request of another signer", op: admission.Update,
			obj: csr("example.com/x", nil, nil, false), old: csr("example.com/x", victim, nil, false)},
		{name: "operator deletes a request", op: admission.Delete, old: csr("flotilla.io/agent", victim, renewal, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{op: tt.op, gvk: kind, resource: "certificatesigningrequests", subresource: tt.sub, name: "flotilla-agent-victim-1",
				obj: tt.obj, old: tt.old, user: tt.user}
			checkRefusal(t, NewProtection(hubUser.Name).Validate(context.Background(), r.attributes(), nil), tt.want)
		})
	}
}

// TestProtectionOfCertificateSerials (the attack of a CSR creator): only the hub sets,
// changes or removes the annotations of a Cluster that name the agent
// certificates it accepts, system:masters (flotilla-admin) included;
// everything else of a Cluster stays the operator's.
func TestProtectionOfCertificateSerials(t *testing.T) {
	cluster := func(annotations string) runtime.Object {
		return object(t, "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: victim\n  labels: {site: a}\n  annotations: {"+annotations+"}\n")
	}
	relabelled := object(t, "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: victim\n  labels: {site: b}\n"+
		"  annotations: {flotilla.io/agent-certificate-serial: abc}\n")
	refusal := func(who string) string {
		return `clusters.flotilla.io "victim" is forbidden: annotations flotilla.io/agent-certificate-serial, flotilla.io/agent-certificate-previous-serial, ` +
			`flotilla.io/agent-certificate-request-uid of a Cluster name the agent certificates it accepts: only the hub (user flotilla:hub) writes them, ` +
			`when it issues one. To give the cluster a new certificate, run flotilla-hub certs issue on the hub, or join its agent with a token ` +
			`(flotilla token create --cluster NAME --replace); to revoke its certificates, delete the Cluster; ` + who + ` is not the hub`
	}
	const (
		serial   = "flotilla.io/agent-certificate-serial: abc"
		other    = "flotilla.io/agent-certificate-serial: def"
		previous = "flotilla.io/agent-certificate-serial: def, flotilla.io/agent-certificate-previous-serial: abc"
		uid      = "flotilla.io/agent-certificate-serial: abc, flotilla.io/agent-certificate-request-uid: 1234"
		note     = "flotilla.io/agent-certificate-serial: abc, note: hello"
	)
	tests := []struct {
		name     string
		op       admission.Operation
		sub      string
		obj, old runtime.Object
		user     user.Info
		want     string
	}{
		{name: "admin creates a Cluster with a serial", op: admission.Create, obj: cluster(serial), user: admin, want: refusal(`user "flotilla:admin"`)},
		{name: "operator creates a Cluster with an empty serial", op: admission.Create, obj: cluster(`flotilla.io/agent-certificate-serial: ""`),
			want: refusal(`user "otto"`)},
		{name: "operator creates a Cluster without one", op: admission.Create, obj: cluster("")},
		{name: "admin edits the serial", op: admission.Update, obj: cluster(other), old: cluster(serial), user: admin, want: refusal(`user "flotilla:admin"`)},
		{name: "operator removes the serial", op: admission.Update, obj: cluster(""), old: cluster(serial), want: refusal(`user "otto"`)},
		{name: "operator sets a previous serial", op: admission.Update, obj: cluster(previous), old: cluster(other), want: refusal(`user "otto"`)},
		{name: "operator removes the request UID", op: admission.Update, obj: cluster(serial), old: cluster(uid), want: refusal(`user "otto"`)},
		{name: "operator relabels, serial kept", op: admission.Update, obj: relabelled, old: cluster(serial)},
		{name: "operator annotates, serial kept", op: admission.Update, obj: cluster(note), old: cluster(serial)},
		{name: "status update", op: admission.Update, sub: "status", obj: cluster(serial), old: cluster(serial), user: hubUser},
		{name: "the hub records a join", op: admission.Update, obj: cluster(uid), old: cluster(serial), user: hubUser},
		{name: "the hub registers a Cluster", op: admission.Create, obj: cluster(uid), user: hubUser},
		{name: "operator deletes a Cluster", op: admission.Delete, old: cluster(serial)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{op: tt.op, gvk: clusterGVK, resource: "clusters", subresource: tt.sub, obj: tt.obj, old: tt.old, user: tt.user}
			checkRefusal(t, NewProtection(hubUser.Name).Validate(context.Background(), r.attributes(), nil), tt.want)
		})
	}
}

// checkRefusal checks err is nil when want is empty, otherwise Forbidden
// with message want.
func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
		return
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("error = %v, want Forbidden", err)
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}
