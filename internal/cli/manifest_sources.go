package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// stdinName stands for standard input ("-f -") in messages.
const stdinName = "<stdin>"

// manifestExtensions are the files apply and delete read from a directory.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// source is the content of one file given with -f (or found in a
// directory given with -f), or of standard input.
type source struct {
	name string // the path, as given or found, or stdinName
	data []byte
}

// readSources reads every -f argument in order: a file, every manifest file
// of a directory (sorted by name; with recursive, of its subdirectories too)
// or "-" for stdin.
func readSources(stdin io.Reader, args []string, recursive bool) ([]source, error) {
	var sources []source
	for _, arg := range args {
		found, err := readSource(stdin, arg, recursive)
		if err != nil {
			return nil, err
		}
		sources = append(sources, found...)
	}
	return sources, nil
}

func readSource(stdin io.Reader, arg string, recursive bool) ([]source, error) {
	if arg == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return []source{{name: stdinName, data: data}}, nil
	}
	info, err := os.Stat(arg)
	if err != nil {
		return nil, pathError(arg, err)
	}
	if !info.IsDir() {
		data, err := os.ReadFile(arg)
		if err != nil {
			return nil, pathError(arg, err)
		}
		return []source{{name: arg, data: data}}, nil
	}
	return readDir(arg, recursive)
}

// readDir reads the manifest files of dir. A directory without any is an
// error: it is more likely a wrong path (or a missing -R) than a wish to
// apply nothing.
func readDir(dir string, recursive bool) ([]source, error) {
	var sources []source
	hasSubdirs := false
	// WalkDir visits entries in lexical order, so the result is sorted.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return pathError(path, err)
		}
		if d.IsDir() {
			if path == dir || recursive {
				return nil
			}
			hasSubdirs = true
			return filepath.SkipDir
		}
		if !isManifestFile(path) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return pathError(path, err)
		}
		sources = append(sources, source{name: path, data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		hint := ""
		if hasSubdirs {
			hint = " (add -R to read its subdirectories)"
		}
		return nil, fmt.Errorf("directory %s has no %s files%s", dir, strings.Join(manifestExtensions, ", "), hint)
	}
	return sources, nil
}

func isManifestFile(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	for _, e := range manifestExtensions {
		if ext == e {
			return true
		}
	}
	return false
}

// pathError says which path could not be read, without the "stat" or
// "open" that os adds to its own message.
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot read %s: %w", path, err)
}
