// Command diagram renders a D2 diagram (https://d2lang.com) to SVG with D2's
// Go library: no browser, no d2 binary. The same source always gives the
// same bytes, so a test can check that a committed SVG is current. The
// docs' pictures are drawn this way; from this folder:
//
//	go run . ../../../docs/architecture.d2 ../../../docs/architecture.svg
//
// The layout engine (dagre, the default, or elk), the theme and the padding
// come from the source's own vars.d2-config.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"oss.terrastruct.com/d2/d2graph"
	"oss.terrastruct.com/d2/d2layouts/d2dagrelayout"
	"oss.terrastruct.com/d2/d2layouts/d2elklayout"
	"oss.terrastruct.com/d2/d2lib"
	"oss.terrastruct.com/d2/d2renderers/d2svg"
	d2log "oss.terrastruct.com/d2/lib/log"
	"oss.terrastruct.com/d2/lib/textmeasure"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "diagram: %v\n", err)
			os.Exit(1)
		}
	}
}

func run(args []string, stderr io.Writer) error {
	fs := pflag.NewFlagSet("diagram", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: diagram SOURCE.d2 OUT.svg\n\nRenders the D2 diagram SOURCE.d2 to OUT.svg, the same bytes for the same source.\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return errors.New("need SOURCE.d2 and OUT.svg")
	}
	src, out := fs.Arg(0), fs.Arg(1)
	svg, err := renderFile(src, stderr)
	if err != nil {
		return err
	}
	return writeFile(out, svg)
}

// renderFile reads and renders the D2 file at path; D2's warnings go to
// logs.
func renderFile(path string, logs io.Writer) ([]byte, error) {
	input, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return render(path, input, logs)
}

// render compiles input, lays it out and renders it to SVG. path only
// names the source in errors, which D2 gives as path:line:column.
func render(path string, input []byte, logs io.Writer) ([]byte, error) {
	ctx := d2log.With(context.Background(), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ruler, err := textmeasure.NewRuler()
	if err != nil {
		return nil, fmt.Errorf("text ruler: %w", err)
	}
	compileOpts := &d2lib.CompileOptions{
		InputPath:      path,
		Ruler:          ruler,
		LayoutResolver: layout,
	}
	omitVersion := true // the library reports a development version, not v0.7.2
	renderOpts := &d2svg.RenderOpts{OmitVersion: &omitVersion}
	diagram, _, err := d2lib.Compile(ctx, string(input), compileOpts, renderOpts)
	if err != nil {
		return nil, err // D2's errors start with path:line:column
	}
	svg, err := d2svg.Render(diagram, renderOpts)
	if err != nil {
		return nil, fmt.Errorf("%s: render: %w", path, err)
	}
	return svg, nil
}

// layout resolves vars.d2-config.layout-engine.
func layout(engine string) (d2graph.LayoutGraph, error) {
	switch engine {
	case "dagre":
		return d2dagrelayout.DefaultLayout, nil
	case "elk":
		return d2elklayout.DefaultLayout, nil
	}
	return nil, fmt.Errorf("layout engine %q: this command knows dagre and elk", engine)
}

// writeFile replaces path with data through a temporary file beside it, so
// a failed write leaves the old picture in place.
func writeFile(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".diagram-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
