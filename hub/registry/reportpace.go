package registry

import (
	"time"

	"golang.org/x/time/rate"
)

// An agent's status reports rewrite its Cluster only at a pace: a few
// writes at once (a session's first report, a burst of changes), then one
// per reportWriteInterval, the newest report's content each time. Each
// write stores the whole object (its served APIs included, up to
// maxStoredAPIBytes), so an agent that changes what it reports five times
// a second would otherwise grow the store by megabytes a second. Health
// changes and the hub's own changes are never held back: they mark the
// cluster dirty directly, and a report's pending change rides along.
const (
	reportWriteBurst    = 4
	reportWriteInterval = 10 * time.Second
)

// reportChangedLocked records that a status report changed the cluster's
// object: it is written at the next flush its pace allows.
func (r *Registry) reportChangedLocked(cluster string) {
	if r.reportDirty[cluster] {
		r.stats.reportsCoalesced.Add(1)
	}
	r.reportDirty[cluster] = true
}

// promoteReportsLocked marks dirty the clusters whose report changes may
// be written now: those already dirty for another reason (the write
// carries them) and those within their pace.
func (r *Registry) promoteReportsLocked(now time.Time) {
	for name := range r.reportDirty {
		e, ok := r.entries[name]
		if !ok {
			delete(r.reportDirty, name)
			continue
		}
		if e.reportWrites == nil {
			e.reportWrites = rate.NewLimiter(rate.Every(reportWriteInterval), reportWriteBurst)
		}
		if r.dirty[name] || e.reportWrites.AllowN(now, 1) {
			r.dirty[name] = true
			delete(r.reportDirty, name)
		}
	}
}
