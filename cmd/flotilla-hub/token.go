package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/internal/cli"
)

// exitCode ends the process with that code, the command having said why.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// tokenCommand runs `flotilla token ...` against this hub as its admin:
// the same command, with DATA/admin.kubeconfig, for an operator on the
// hub's machine who has no kubeconfig yet.
func tokenCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	dataDir, rest, err := cutDataDir(args)
	if err != nil {
		return err
	}
	kubeconfig := apiserver.AdminKubeconfigPath(dataDir)
	if _, err := os.Stat(kubeconfig); err != nil {
		return fmt.Errorf("--data-dir %s: no admin kubeconfig (%w); start flotilla-hub with this --data-dir first", dataDir, err)
	}
	app := &cli.App{Name: "flotilla-hub", Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Now: time.Now, Getenv: os.Getenv}
	if code := app.Run(ctx, append([]string{"token", "--kubeconfig", kubeconfig}, rest...)); code != 0 {
		return exitCode(code)
	}
	return nil
}

// cutDataDir takes --data-dir DIR (or --data-dir=DIR) out of args; the
// rest are flotilla token's.
func cutDataDir(args []string) (string, []string, error) {
	dir, rest := "flotilla-data", make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--data-dir":
			if i+1 == len(args) {
				return "", nil, fmt.Errorf("--data-dir needs a folder")
			}
			dir = args[i+1]
			i++
		case strings.HasPrefix(a, "--data-dir="):
			dir = strings.TrimPrefix(a, "--data-dir=")
		default:
			rest = append(rest, a)
		}
	}
	return filepath.Clean(dir), rest, nil
}
