package work

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/protocol"
)

// Upsert asks the engine to apply a generation of a Work. It returns at
// once; a WorkApplied on the feeds answers it. A newer request for the same
// Work supersedes it: then only the newer one is answered.
//
// An upsert is also what ends the fencing of a fenced Work.
func (e *Engine) Upsert(u *protocol.WorkUpsert) {
	e.request(u.Name, func(st *workState) { st.desired, st.deleting, st.fence = u, false, false })
	if u.StopAfterSeconds > 0 {
		e.wakeFencing()
	}
}

// Delete asks the engine to delete every object of a Work. It returns at
// once; a WorkDeleted on the feeds confirms that they are gone.
func (e *Engine) Delete(work string) {
	e.request(work, func(st *workState) { st.deleting, st.fence, st.asked = true, false, map[identity]types.UID{} })
}

// request records what is wanted of work, ends the reconcile in progress,
// which it supersedes, and queues the Work with a fresh backoff.
func (e *Engine) request(work string, set func(*workState)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requestLocked(work, set)
}

// requestLocked is request with e.mu held.
func (e *Engine) requestLocked(work string, set func(*workState)) {
	st := e.state(work)
	set(st)
	st.seq++
	if st.cancel != nil {
		st.cancel()
	}
	if e.queue != nil { // else Run queues it once the records are loaded
		e.queue.Forget(work)
		e.queue.Add(work)
	}
}

// operation is one reconcile of a Work: an apply of upsert, a fence, or a
// delete.
type operation struct {
	work   string
	seq    uint64
	fence  bool
	upsert *protocol.WorkUpsert // nil for a fence or a delete
	record *record
	asked  map[identity]types.UID
	ctx    context.Context
}

// processNext reconciles the next queued Work; false means the queue shut
// down.
func (e *Engine) processNext() bool {
	work, shutdown := e.queue.Get()
	if shutdown {
		return false
	}
	defer e.queue.Done(work)
	op, cancel := e.begin(work)
	if op == nil {
		return true
	}
	defer cancel()
	switch {
	case op.fence:
		stopped, err := e.fence(op)
		e.settleFence(op, stopped, err)
	case op.upsert != nil:
		res := e.apply(op)
		if observe := e.cfg.ObserveApply; observe != nil && op.ctx.Err() == nil {
			observe(res.took, res.answer.Applied)
		}
		e.settleApply(op, res)
	default:
		e.settleDelete(op, e.deleteWork(op))
	}
	return true
}

// begin starts an operation for what is wanted of work, or returns nil if
// that is done already (a retry queued before it succeeded some other way).
func (e *Engine) begin(work string) (*operation, context.CancelFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.works[work]
	if st == nil || st.seq == st.doneSeq {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(e.ctx)
	st.cancel = cancel
	op := &operation{work: work, seq: st.seq, record: st.record, asked: st.asked, ctx: ctx}
	switch {
	case st.deleting:
	case st.fence:
		op.fence = true
	default:
		op.upsert = st.desired
	}
	return op, cancel
}

// settle ends op: unless a newer request superseded it (that one is queued)
// or the engine is stopping, it retries with backoff or marks the request
// done. Call with e.mu held; it returns the Work's state, nil if op no
// longer counts.
func (e *Engine) settle(op *operation, ok bool) *workState {
	st := e.works[op.work]
	st.cancel = nil
	if e.ctx.Err() != nil || st.seq != op.seq {
		return nil
	}
	if ok {
		st.doneSeq = op.seq
		e.queue.Forget(op.work)
	} else {
		e.queue.AddRateLimited(op.work)
	}
	return st
}

// watchesInUse are the informers that watch every object a Work may
// have. Call with e.mu held.
func (e *Engine) watchesInUse() map[watchKey]bool {
	use := map[watchKey]bool{}
	for _, st := range e.works {
		for _, ref := range st.record.all() {
			use[e.watch.key(ref)] = true
		}
		if st.current == nil {
			continue
		}
		for _, entry := range st.current.entries {
			if !entry.failed {
				use[e.watch.key(refOf(entry.result))] = true
			}
		}
	}
	return use
}

// settleApply reports an apply and makes its manifests the ones status
// watches.
func (e *Engine) settleApply(op *operation, res applyResult) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// A Work only the member policy failed is settled too: a retry would
	// refuse it again, and would keep replacing the set status watches.
	st := e.settle(op, res.answer.Applied || res.refusedOnly)
	if st == nil {
		return
	}
	// The answer reports the manifests' status as the apply left them: it
	// counts as a report, so the changes that follow an apply at once (a
	// controller's first status of a new object) wait for StatusInterval
	// and go in one WorkStatus with what comes next, not in one each.
	st.current, st.reported, st.reportedAt = res.set, res.answer.Manifests, time.Now()
	e.feeds.emit(res.answer)
	// A prune may have dropped the last object of a resource, and health
	// may have moved on since the apply.
	e.watch.retain(e.watchesInUse())
	e.statusQ.Add(op.work)
	log := e.log.Info
	if !res.answer.Applied {
		log = e.log.Warn
	}
	log("Work applied", "work", op.work, "generation", op.upsert.Generation, "applied", res.answer.Applied,
		"manifests", len(res.answer.Manifests), "took", res.took.Round(time.Millisecond), "message", res.answer.Message)
}

// settleDelete confirms a finished delete and forgets the Work.
func (e *Engine) settleDelete(op *operation, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.settle(op, err == nil); st == nil {
		return
	}
	if err != nil {
		level := e.log.Warn
		if errors.Is(err, errTerminating) {
			level = e.log.Debug
		}
		level("Work not deleted yet", "work", op.work, "err", err)
		return
	}
	delete(e.works, op.work)
	e.watch.retain(e.watchesInUse())
	e.feeds.emit(&protocol.WorkDeleted{Name: op.work})
	e.log.Info("Work deleted", "work", op.work)
}
