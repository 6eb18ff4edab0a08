package join

import (
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
)

// TestRequestsOfOtherCreatorsAreFailed (the attack of a CSR creator): a request for
// signer flotilla.io/agent that someone other than the hub created — one
// that looks like a renewal of the cluster's current certificate, a join
// with a valid token, or one an operator approved — is marked Failed and
// never signed, in both approval modes; the cluster's serial stays.
func TestRequestsOfOtherCreatorsAreFailed(t *testing.T) {
	for _, tt := range []struct {
		name, cluster string
		approval      string
		mark          func(f *fixture, csr *certificatesv1.CertificateSigningRequest)
		approve       bool // an operator approves it first
	}{
		{name: "renewal of the current certificate, auto", cluster: "edge-creator-1", approval: ApprovalAuto, mark: renewalOfCurrent},
		{name: "renewal of the current certificate, manual", cluster: "edge-creator-2", approval: ApprovalManual, mark: renewalOfCurrent},
		{name: "join with a valid token, auto", cluster: "edge-creator-3", approval: ApprovalAuto, mark: joinWithToken},
		{name: "join approved by an operator, manual", cluster: "edge-creator-4", approval: ApprovalManual, mark: joinWithToken, approve: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.approval, time.Second)
			cluster := tt.cluster
			if err := RecordSerial(t.Context(), f.env.Flotilla, cluster, big.NewInt(0xabc), Registration{}); err != nil {
				t.Fatal(err)
			}
			_, x509req := request(t, cluster, "", nil)
			csr := newRenewalRequest(cluster, x509req, big.NewInt(0xabc), requestSeconds(time.Hour))
			csr.Annotations = map[string]string{}
			tt.mark(f, csr)
			mallory := kubernetes.NewForConfigOrDie(f.env.AsUser("mallory", "system:masters")).CertificatesV1().CertificateSigningRequests()
			changed := f.c.changeOf(csr.Name)
			created, err := mallory.Create(t.Context(), csr, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.approve {
				created.Status.Conditions = append(created.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove"})
				if _, err := f.env.Kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), csr.Name, created, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got := f.awaitFinished(csr.Name, changed)
			if len(got.Status.Certificate) > 0 {
				t.Fatalf("request of mallory signed: %s", got.Status.Certificate)
			}
			failed := lastCondition(got)
			if failed.Type != certificatesv1.CertificateFailed || failed.Reason != ReasonNotCreatedByHub ||
				!strings.Contains(failed.Message, `created by user "mallory", not by the hub (`+testHubUser+`)`) {
				t.Errorf("condition %+v, want Failed %s naming mallory", failed, ReasonNotCreatedByHub)
			}
			if current, previous := f.serials(cluster); current != "abc" || previous != "" {
				t.Errorf("serial %q, previous %q; want abc alone", current, previous)
			}
			if f.events.Count("Warning "+ReasonNotCreatedByHub) == 0 {
				t.Errorf("no Warning event %s: %v", ReasonNotCreatedByHub, f.events.List())
			}
			if n := f.c.SignerCounts().NotCreatedByHub; n < 1 {
				t.Errorf("SignerCounts().NotCreatedByHub = %d, want the refusal counted", n)
			}
		})
	}
}

// renewalOfCurrent marks csr a renewal of the cluster's certificate abc.
func renewalOfCurrent(_ *fixture, csr *certificatesv1.CertificateSigningRequest) {
	csr.Annotations[RenewalOfAnnotation] = "abc"
}

// joinWithToken marks csr a join with a valid token bound to its cluster.
func joinWithToken(f *fixture, csr *certificatesv1.CertificateSigningRequest) {
	tok := f.token(bootstraptoken.CreateOptions{Cluster: csr.Labels[ClusterLabel], Replace: true})
	csr.Annotations[TokenAnnotation] = tok.ID
}

// awaitFinished waits (up to 20 s) for request name to be signed, denied
// or failed, and returns it.
func (f *fixture) awaitFinished(name string, changed <-chan struct{}) *certificatesv1.CertificateSigningRequest {
	f.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if csr, err := f.c.lister.Get(name); err == nil && (finished(csr) || len(csr.Status.Certificate) > 0) {
			return csr
		}
		select {
		case <-changed:
			changed = f.c.changeOf(name)
		case <-deadline:
			f.t.Fatalf("request %s neither signed nor refused after 20 s", name)
		}
	}
}

func lastCondition(csr *certificatesv1.CertificateSigningRequest) certificatesv1.CertificateSigningRequestCondition {
	if len(csr.Status.Conditions) == 0 {
		return certificatesv1.CertificateSigningRequestCondition{}
	}
	return csr.Status.Conditions[len(csr.Status.Conditions)-1]
}
