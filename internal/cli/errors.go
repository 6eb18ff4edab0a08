package cli

import (
	"errors"
	"fmt"
)

// errHelpShown ends a run that printed help: it is not a failure.
var errHelpShown = errors.New("help shown")

// usageError is a mistake on the command line: nothing was sent to the hub.
// It exits with code 2 and points at the help of the command.
type usageError struct {
	cmd string // e.g. "flotilla taint", for the --help hint
	msg string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a usage error of the command cmd ("flotilla get").
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}
