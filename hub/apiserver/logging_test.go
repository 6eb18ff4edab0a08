package apiserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietHandlerDemotesInfoAndBenignErrors(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(quietHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})})
	logger.Info("Adding GroupVersion")
	logger.Error("The manifest file is empty, ignoring.")
	logger.Warn("slow etcd")
	logger.Error("Error removing old endpoints")
	got := buf.String()
	for _, want := range []string{"level=WARN msg=\"slow etcd\"", "level=ERROR msg=\"Error removing old endpoints\""} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"Adding GroupVersion", "manifest file"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("log at info level has %q:\n%s", unwanted, got)
		}
	}
	buf.Reset()
	slog.New(quietHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})}).Info("Adding GroupVersion")
	if !strings.Contains(buf.String(), "level=DEBUG msg=\"Adding GroupVersion\"") {
		t.Errorf("debug log: %s", buf.String())
	}
}
