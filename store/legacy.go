package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// legacyPrefix is where Flotilla kept its objects before they moved into
// its Kubernetes API server (kube-apiserver keeps its own under /registry).
const legacyPrefix = "/flotilla/"

// CheckNoLegacyData refuses an etcd that still holds objects of Flotilla's
// old store: this hub cannot read them, and starting over them silently
// would look like an empty fleet.
func (s *Store) CheckNoLegacyData(ctx context.Context) error {
	resp, err := s.client.Get(ctx, legacyPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("check the store for old data: %w", err)
	}
	if resp.Count > 0 {
		return fmt.Errorf("%s holds %d objects of Flotilla's old store (keys under %s, from before the hub served a Kubernetes API); "+
			"this hub cannot read them. Start with an empty --data-dir (or a clean etcd), then re-apply your templates and policies "+
			"with kubectl or flotilla apply; agents register again when they reconnect. Move the old data aside to keep it",
			s.where(), resp.Count, legacyPrefix)
	}
	return nil
}

// where names the etcd in messages.
func (s *Store) where() string {
	if s.embedded != nil {
		return "the embedded etcd in " + s.embedded.Config().Dir
	}
	return fmt.Sprintf("etcd %v", s.endpoints)
}
