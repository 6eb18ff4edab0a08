// Command images builds an OCI image tarball for one of Flotilla's binaries
// without a container engine, with go-containerregistry: the static binary
// on an empty base, run as a non-root user, with OCI labels. `make images`
// calls it for flotilla-hub and flotilla-agent. The tarball is an OCI image
// layout in a tar (oci-archive): `docker load`, `podman load`,
// `ctr images import` and `skopeo copy oci-archive:...` read it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/pflag"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	var s spec
	var out string
	fs := pflag.NewFlagSet("images", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.binary, "binary", "", "the static binary to package (required)")
	fs.StringVar(&s.repository, "repository", "", "image name without tag, e.g. ghcr.io/flotilla-io/flotilla-agent (required)")
	fs.StringVar(&s.tag, "tag", "", "image tag, e.g. the version (required)")
	fs.StringVar(&s.arch, "arch", runtime.GOARCH, "the binary's architecture (linux only)")
	fs.StringVar(&s.source, "source", "https://github.com/flotilla-io/flotilla", "org.opencontainers.image.source label")
	fs.StringVar(&s.revision, "revision", "", "org.opencontainers.image.revision label (the git commit)")
	fs.StringVar(&s.description, "description", "", "org.opencontainers.image.description label")
	fs.Int64Var(&s.created, "created", 0, "image creation time, Unix seconds (default $SOURCE_DATE_EPOCH or 0, so builds are reproducible)")
	fs.StringVarP(&out, "out", "o", "", "tarball to write (required)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: images --binary FILE --repository NAME --tag TAG --out FILE.tar\n\n"+
			"Packages a static linux binary as an OCI image tarball (user 65532, entrypoint the binary).\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !fs.Changed("created") {
		s.created = sourceDateEpoch()
	}
	if s.binary == "" || s.repository == "" || s.tag == "" || out == "" {
		fs.Usage()
		return errors.New("--binary, --repository, --tag and --out are required")
	}
	img, err := build(s)
	if err != nil {
		return err
	}
	if err := writeArchive(out, s.reference(), img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "images: %s (%s) -> %s\n", s.reference(), digest, out)
	return nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, or 0 when unset or malformed.
func sourceDateEpoch() int64 {
	var v int64
	if _, err := fmt.Sscan(os.Getenv("SOURCE_DATE_EPOCH"), &v); err != nil {
		return 0
	}
	return v
}
