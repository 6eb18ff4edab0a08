// Package v1alpha1 holds Flotilla's object types (API group flotilla.io,
// version v1alpha1). Objects have Kubernetes shape and use apimachinery's
// meta types; field names follow Karmada. Deep copies are generated
// (make generate).
//
// +kubebuilder:object:generate=true
// +groupName=flotilla.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName and Version of Flotilla's own objects.
const (
	GroupName = "flotilla.io"
	Version   = "v1alpha1"
)

// APIVersion is the apiVersion field of Flotilla's objects.
const APIVersion = GroupName + "/" + Version

// SchemeGroupVersion is Flotilla's group and version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Kinds of Flotilla's objects.
const (
	KindCluster                      = "Cluster"
	KindClusterList                  = "ClusterList"
	KindPropagationPolicy            = "PropagationPolicy"
	KindPropagationPolicyList        = "PropagationPolicyList"
	KindClusterPropagationPolicy     = "ClusterPropagationPolicy"
	KindClusterPropagationPolicyList = "ClusterPropagationPolicyList"
	KindResourceBinding              = "ResourceBinding"
	KindResourceBindingList          = "ResourceBindingList"
	KindClusterResourceBinding       = "ClusterResourceBinding"
	KindClusterResourceBindingList   = "ClusterResourceBindingList"
	KindWork                         = "Work"
	KindWorkList                     = "WorkList"
	KindPurgeRequest                 = "PurgeRequest"
	KindPurgeRequestList             = "PurgeRequestList"
	KindClusterTaintPolicy           = "ClusterTaintPolicy"
	KindClusterTaintPolicyList       = "ClusterTaintPolicyList"
)

// TypeMeta returns the TypeMeta of a Flotilla kind.
func TypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: APIVersion, Kind: kind}
}

// LeaseNamespace holds one coordination.k8s.io/v1 Lease per cluster, named
// after the cluster.
const LeaseNamespace = "flotilla-cluster-lease"

// AnnotationAgentCertificateSerial on a Cluster is the serial, in hex, of
// the agent certificate the hub issued last for the cluster (at its join
// or rotation): older certificates of the cluster are refused.
const AnnotationAgentCertificateSerial = "flotilla.io/agent-certificate-serial"

// AnnotationAgentCertificatePreviousSerial on a Cluster is the serial, in
// hex, of the certificate a rotation renewed: it stays acceptable until the
// agent's first session with the new certificate (recorded in
// AnnotationAgentCertificateSerial), so an agent that never received its
// new certificate is not locked out. A join or `certs issue` removes it.
const AnnotationAgentCertificatePreviousSerial = "flotilla.io/agent-certificate-previous-serial"

// AnnotationAgentCertificateRequestUID on a Cluster is the UID of the join
// request whose certificate serial it records, so that signing that
// request again (after a failed write) is not taken for another join.
const AnnotationAgentCertificateRequestUID = "flotilla.io/agent-certificate-request-uid"

// AgentCertificateAnnotations are the annotations that say which agent
// certificates a Cluster accepts: only the hub writes them (admission
// plugin FlotillaProtection).
var AgentCertificateAnnotations = []string{AnnotationAgentCertificateSerial, AnnotationAgentCertificatePreviousSerial, AnnotationAgentCertificateRequestUID}

// AgentSignerName is the signer of agent certificates: only the hub
// creates CertificateSigningRequests for it, and signs them.
const AgentSignerName = "flotilla.io/agent"
