package hub

import (
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/internal/writelimit"
)

// reportsConfig is cfg for the clients that write reported status: their
// writes share limiter's slots.
func reportsConfig(cfg *rest.Config, limiter *writelimit.Limiter) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(limiter.Wrap)
	return out
}
