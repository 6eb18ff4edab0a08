package hub

import (
	"context"
	"fmt"

	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/hub/admission"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/store"
)

// startAPIServer runs the embedded kube-apiserver on s's etcd until runCtx
// ends, and installs Flotilla's CRDs and ClusterRoles; ctx bounds the start.
func startAPIServer(ctx, runCtx context.Context, cfg Config, s *store.Store, ca *pki.CA) (*apiserver.Server, error) {
	api, err := apiserver.Start(runCtx, apiserver.Config{
		DataDir: cfg.DataDir,
		Addr:    cfg.APIAddr,
		Etcd: apiserver.EtcdConfig{Servers: s.Endpoints(),
			CAFile: cfg.EtcdCAFile, CertFile: cfg.EtcdCertFile, KeyFile: cfg.EtcdKeyFile},
		CA:              ca,
		SANs:            cfg.TLSSANs,
		AuditLogPath:    cfg.AuditLogPath,
		AuditPolicyFile: cfg.AuditPolicyFile,
		// The hub's own settings first: --kube-apiserver-arg wins.
		ExtraArgs: append([]string{"--event-ttl=" + cfg.EventTTL.String()}, cfg.KubeAPIServerArgs...),
		Admission: admission.Plugins(cfg.Clock, apiserver.HubUser),
		Logger:    cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	all, err := crds.Hub()
	if err == nil {
		err = crds.Install(ctx, api.HubConfig, all)
	}
	if err == nil {
		err = apiserver.InstallRoles(ctx, api.HubConfig)
	}
	if err != nil {
		return api, fmt.Errorf("set up the API server: %w", err)
	}
	return api, nil
}
