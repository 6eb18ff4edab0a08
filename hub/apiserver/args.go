package apiserver

import (
	"net"
	"strings"
)

// Flags the hub always sets; Config.ExtraArgs come after them and win.
const (
	// serviceClusterIPRange is required by kube-apiserver; nothing on the hub
	// uses Services, so any private range will do.
	serviceClusterIPRange = "10.96.0.0/12"
	// serviceAccountIssuer is the iss claim of ServiceAccount tokens.
	serviceAccountIssuer = "https://kubernetes.default.svc"
	// disabledAdmission keeps templates inert: nothing on the hub runs Pods,
	// owns ServiceAccount token Secrets or releases storage, so these
	// plugins would only mutate templates or block their deletion.
	disabledAdmission = "ServiceAccount,StorageObjectInUseProtection,DefaultTolerationSeconds"
)

// arguments are the kube-apiserver command-line flags for cfg.
func arguments(cfg Config, f files, addr *net.TCPAddr) []string {
	args := []string{
		"--etcd-servers=" + strings.Join(cfg.Etcd.Servers, ","),
		"--advertise-address=" + clientHost(addr.IP),
		// With no endpoint reconciler a loopback advertise address is fine:
		// the hub publishes no "kubernetes" Service endpoints.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servingKey,
		"--client-ca-file=" + f.caFile,
		"--service-account-key-file=" + f.serviceAccountKey,
		"--service-account-signing-key-file=" + f.serviceAccountKey,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=" + disabledAdmission,
		"--profiling=false",
	}
	if names := pluginNames(cfg.Admission); names != "" {
		args = append(args, "--enable-admission-plugins="+names)
	}
	if cfg.Etcd.CAFile != "" {
		args = append(args, "--etcd-cafile="+cfg.Etcd.CAFile)
	}
	if cfg.Etcd.CertFile != "" {
		args = append(args, "--etcd-certfile="+cfg.Etcd.CertFile, "--etcd-keyfile="+cfg.Etcd.KeyFile)
	}
	if cfg.AuditLogPath != "" {
		policy := f.auditPolicy
		if cfg.AuditPolicyFile != "" {
			policy = cfg.AuditPolicyFile
		}
		args = append(args,
			"--audit-log-path="+cfg.AuditLogPath,
			"--audit-policy-file="+policy,
			"--audit-log-format=json",
			"--audit-log-maxsize=100", // MiB per file, five files kept
			"--audit-log-maxbackup=5",
		)
	}
	return append(args, cfg.ExtraArgs...)
}

func pluginNames(plugins []AdmissionPlugin) string {
	names := make([]string, len(plugins))
	for i, p := range plugins {
		names[i] = p.Name
	}
	return strings.Join(names, ",")
}
