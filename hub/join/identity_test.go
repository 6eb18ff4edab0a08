package join

import (
	"context"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/protocol"
)

func TestIdentityRefusal(t *testing.T) {
	joined := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "victim", Annotations: map[string]string{
		v1alpha1.AnnotationAgentCertificateSerial: "a1", RequestUIDAnnotation: "uid-1"}}}
	unjoined := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "victim"}}
	for _, tt := range []struct {
		name     string
		existing *v1alpha1.Cluster
		token    bootstraptoken.Token
		uid      types.UID
		refused  bool
	}{
		{"no Cluster", nil, bootstraptoken.Token{}, "", false},
		{"a Cluster without a certificate", unjoined, bootstraptoken.Token{}, "", false},
		{"joined, unbound token", joined, bootstraptoken.Token{}, "", true},
		{"joined, token bound to it", joined, bootstraptoken.Token{Cluster: "victim"}, "", true},
		{"joined, reusable token bound to it", joined, bootstraptoken.Token{Cluster: "victim", Reusable: true}, "", true},
		{"joined, replace token for another cluster", joined, bootstraptoken.Token{Cluster: "other", Replace: true}, "", true},
		{"joined, replace token without a cluster", joined, bootstraptoken.Token{Replace: true}, "", true},
		{"joined, replace token for it", joined, bootstraptoken.Token{Cluster: "victim", Replace: true}, "", false},
		{"joined by this very request", joined, bootstraptoken.Token{}, "uid-1", false},
		{"joined by another request", joined, bootstraptoken.Token{}, "uid-2", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := identityRefusal(tt.existing, "victim", tt.token, tt.uid)
			if (got != "") != tt.refused {
				t.Fatalf("identityRefusal = %q, want refused %t", got, tt.refused)
			}
			if tt.refused && (!strings.HasPrefix(got, ReasonIdentityTaken+": ") || !strings.Contains(got, "flotilla token create --cluster victim --replace")) {
				t.Errorf("refusal %q: want the reason and how to replace", got)
			}
		})
	}
}

// joinAs joins cluster with token and a fresh key.
func (f *fixture) joinAs(cluster string, token bootstraptoken.Token) protocol.Message {
	f.t.Helper()
	req, _ := request(f.t, cluster, token.String(), nil)
	answer, err := f.c.join(f.t.Context(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	return answer
}

func (f *fixture) serial(cluster string) string {
	f.t.Helper()
	c, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Get(f.t.Context(), cluster, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c.Annotations[v1alpha1.AnnotationAgentCertificateSerial]
}

// tokenGone waits until token id is deleted: the join is answered as soon
// as its certificate is stored, and the token deleted just after.
func (f *fixture) tokenGone(id string) bool {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !f.tokenExists(id), nil
	})
	return err == nil
}

func (f *fixture) tokenExists(id string) bool {
	f.t.Helper()
	tokens, _, err := bootstraptoken.List(f.t.Context(), f.env.Kube)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, t := range tokens {
		if t.ID == id {
			return true
		}
	}
	return false
}

// TestJoinCannotTakeAJoinedCluster: once victim joined, no other token
// joins as victim (refused before any request is made, the token left
// unbound and unused), until one made with --replace for victim does,
// which the hub records as an event; single-use tokens are gone once
// their certificate is signed, reusable ones stay.
func TestJoinCannotTakeAJoinedCluster(t *testing.T) {
	f := newFixture(t, ApprovalAuto, 10*time.Second)
	own := f.token(bootstraptoken.CreateOptions{Cluster: "victim"})
	first := f.issued(f.joinAs("victim", own), "victim")
	if !f.tokenGone(own.ID) {
		t.Error("the single-use token is still there after its join")
	}
	serial := first.SerialNumber.Text(16)

	for _, opts := range []bootstraptoken.CreateOptions{
		{},
		{Cluster: "victim"},
		{Reusable: true},
	} {
		tok := f.token(opts)
		answer := f.joinAs("victim", tok)
		e, ok := answer.(*protocol.Error)
		if !ok || e.Code != protocol.CodeTokenRefused || !strings.HasPrefix(e.Message, ReasonIdentityTaken+": ") {
			t.Errorf("token %+v joining as victim: %#v, want TokenRefused %s", opts, answer, ReasonIdentityTaken)
		}
		tokens, _, _ := bootstraptoken.List(t.Context(), f.env.Kube)
		for _, got := range tokens {
			if got.ID == tok.ID && (got.Cluster != opts.Cluster || got.UsedBy != "") {
				t.Errorf("a refused join changed token %s: %+v", tok.ID, got)
			}
		}
	}
	if got := f.serial("victim"); got != serial {
		t.Errorf("victim's serial went from %s to %s", serial, got)
	}
	if csrs := f.requestsOf("victim"); len(csrs) != 1 {
		t.Errorf("certificate requests for victim: %d, want only its own join's", len(csrs))
	}

	reusable := f.token(bootstraptoken.CreateOptions{Reusable: true})
	for _, name := range []string{"edge-a", "edge-b"} {
		f.issued(f.joinAs(name, reusable), name)
	}
	if !f.tokenExists(reusable.ID) {
		t.Error("the reusable token was used up")
	}

	replace := f.token(bootstraptoken.CreateOptions{Cluster: "victim", Replace: true})
	second := f.issued(f.joinAs("victim", replace), "victim")
	if got := f.serial("victim"); got != second.SerialNumber.Text(16) {
		t.Errorf("after --replace victim's serial is %s, want the new certificate's %s", got, second.SerialNumber.Text(16))
	}
	if !f.tokenGone(replace.ID) {
		t.Error("the replace token is still there after its join")
	}
	events := f.events.List()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+EventCertificateReplaced+" Cluster victim: bootstrap token "+replace.ID) ||
		!strings.Contains(events[0], second.SerialNumber.Text(16)+" replaces "+serial) {
		t.Errorf("events %q, want one %s naming the token and both serials", events, EventCertificateReplaced)
	}
}

func (f *fixture) requestsOf(cluster string) []certificatesv1.CertificateSigningRequest {
	f.t.Helper()
	list, err := f.env.Kube.CertificatesV1().CertificateSigningRequests().List(f.t.Context(), metav1.ListOptions{LabelSelector: ClusterLabel + "=" + cluster})
	if err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

// TestJoinPicksUpItsSignedRequest: an agent that joins again with the
// same key after its request was signed (it lost the answer, or waited
// for an operator's approval) gets that certificate, although its
// single-use token is gone; another key with that token gets nothing.
func TestJoinPicksUpItsSignedRequest(t *testing.T) {
	f := newFixture(t, ApprovalAuto, 10*time.Second)
	tok := f.token(bootstraptoken.CreateOptions{})
	req, _ := request(t, "edge-6", tok.String(), nil)
	answers := make([]protocol.Message, 2)
	for i := range answers {
		var err error
		if answers[i], err = f.c.join(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := f.issued(answers[0], "edge-6"), f.issued(answers[1], "edge-6"); !a.Equal(b) {
		t.Errorf("the second answer has certificate %s, the first %s", b.SerialNumber.Text(16), a.SerialNumber.Text(16))
	}
	if e, ok := f.joinAs("edge-6", tok).(*protocol.Error); !ok || e.Code != protocol.CodeTokenRefused {
		t.Errorf("another key with the used token: %#v, want TokenRefused", e)
	}
}

// TestConcurrentJoinsOfOneName: two joins of a new name with two tokens
// both wait for approval (the name is free when they come); once both are
// approved, the first signed takes the name and the other fails.
func TestConcurrentJoinsOfOneName(t *testing.T) {
	f := newFixture(t, ApprovalManual, 100*time.Millisecond)
	for range 2 {
		tok := f.token(bootstraptoken.CreateOptions{})
		if resp, ok := f.joinAs("edge-r", tok).(*protocol.JoinResponse); !ok || !resp.Pending {
			t.Fatalf("join: %#v, want Pending", resp)
		}
	}
	csrs := f.env.Kube.CertificatesV1().CertificateSigningRequests()
	for _, csr := range f.requestsOf("edge-r") {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove"})
		if _, err := csrs.UpdateApproval(t.Context(), csr.Name, &csr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var signed, failed int
	deadline := time.Now().Add(20 * time.Second)
	for signed+failed < 2 && time.Now().Before(deadline) {
		signed, failed = 0, 0
		for _, csr := range f.requestsOf("edge-r") {
			switch {
			case len(csr.Status.Certificate) > 0:
				signed++
			case hasCondition(&csr, certificatesv1.CertificateFailed):
				failed++
				if msg := csr.Status.Conditions[len(csr.Status.Conditions)-1].Message; !strings.HasPrefix(msg, ReasonIdentityTaken) {
					t.Errorf("the failed request says %q, want %s", msg, ReasonIdentityTaken)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if signed != 1 || failed != 1 {
		t.Errorf("%d signed and %d failed, want one of each", signed, failed)
	}
}
