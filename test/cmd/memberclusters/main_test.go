package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no dir", []string{"--count", "2"}, "--dir is required"},
		{"zero count", []string{"--dir", t.TempDir(), "--count", "0"}, "--count 0"},
		{"unknown flag", []string{"--dir", t.TempDir(), "--clusters", "2"}, "unknown flag"},
		{"bad quantity", []string{"--dir", t.TempDir(), "--node-cpu", "many"}, `nodeCPU "many"`},
		{"missing binaries", []string{"--dir", t.TempDir(), "--bin-dir", t.TempDir()}, "make testbin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want an error mentioning %q", tt.args, err, tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}
