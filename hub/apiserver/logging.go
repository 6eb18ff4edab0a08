package apiserver

import (
	"context"
	"log/slog"
)

// benign are kube-apiserver error lines that say nothing wrong on the hub:
// the first comes from the "none" endpoint reconciler at every start, the
// second from an empty metrics allow-list.
var benign = map[string]bool{
	"Found stale data, removed previous endpoints on kubernetes service, apiserver didn't exit successfully previously": true,
	"The manifest file is empty, ignoring.": true,
}

// quietHandler passes kube-apiserver's log records to the hub's handler
// one level down for info (about 150 lines per start, useful only when
// debugging) and to debug for the benign errors; warnings and real errors
// keep their level.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, level slog.Level) bool {
	// Decided in Handle, after the record's message is known.
	return h.Handler.Enabled(ctx, slog.LevelDebug) || h.Handler.Enabled(ctx, level)
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	switch {
	case r.Level == slog.LevelInfo, r.Level >= slog.LevelError && benign[r.Message]:
		r.Level = slog.LevelDebug
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(attrs)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
