package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images run as an unprivileged user and group (the "nonroot" user of
// distroless images, so PodSecurity "restricted" admits them); the binary
// lives in binDir.
const (
	userID   = 65532
	userName = "nonroot"
	binDir   = "/usr/local/bin"
)

// spec says what image to build.
type spec struct {
	binary, repository, tag, arch string
	source, revision, description string
	created                       int64
}

func (s spec) reference() string { return s.repository + ":" + s.tag }

func (s spec) entrypoint() string { return path.Join(binDir, path.Base(s.binary)) }

// build assembles the image: one layer with the binary, /etc/passwd and
// /etc/group naming the non-root user, and /tmp; OCI media types.
func build(s spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.binary)
	if err != nil {
		return nil, fmt.Errorf("--binary: %w", err)
	}
	if err := checkStatic(s.binary); err != nil {
		return nil, err
	}
	created := time.Unix(s.created, 0).UTC()
	layerTar, err := rootfs(s.entrypoint(), bin, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "flotilla images: " + path.Base(s.binary),
	}})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", s.arch, v1.Time{Time: created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", userID, userID),
		Entrypoint: []string{s.entrypoint()},
		WorkingDir: "/",
		Env:        []string{"PATH=" + binDir, "HOME=/tmp"},
		Labels:     s.labels(created),
	}
	return mutate.ConfigFile(img, cf)
}

// labels are the standard OCI annotations, also set as image labels.
func (s spec) labels(created time.Time) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":   path.Base(s.repository),
		"org.opencontainers.image.version": s.tag,
		"org.opencontainers.image.source":  s.source,
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	}
	if s.revision != "" {
		l["org.opencontainers.image.revision"] = s.revision
	}
	if s.description != "" {
		l["org.opencontainers.image.description"] = s.description
	}
	return l
}

// checkStatic refuses binaries that need a dynamic loader: the base is empty.
func checkStatic(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("--binary %s: not a linux executable: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("--binary %s: dynamically linked (build it with CGO_ENABLED=0); the image has no libc", file)
		}
	}
	return nil
}

// rootfs is the layer's tar: directories, passwd/group files and the binary,
// all owned by root except /tmp, with fixed times so builds are reproducible.
func rootfs(entrypoint string, bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/tmp:/sbin/nologin\n", userName, userID, userID, userName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, userID)
	steps := []func() error{
		func() error { return dir("etc", 0o755) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("tmp", 0o1777) },
		func() error { return dir("usr", 0o755) },
		func() error { return dir("usr/local", 0o755) },
		func() error { return dir("usr/local/bin", 0o755) },
		func() error { return file(entrypoint[1:], 0o755, bin) },
		tw.Close,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("layer tar: %w", err)
		}
	}
	return buf.Bytes(), nil
}
