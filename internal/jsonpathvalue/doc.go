// Package jsonpathvalue evaluates a statePreservation rule's kubectl
// JSONPath template on a workload's status, the way both ends read it: the
// agent on the live object in the member cluster, and the hub on the
// status fields the agent reported. A missing key is an error (as in
// Karmada), and the printed value is bounded, so a template over a large
// or hostile document never builds a large string.
package jsonpathvalue
