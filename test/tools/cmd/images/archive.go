package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// writeArchive writes img as an OCI image layout packed in a tar at out,
// its index naming ref the way containerd and podman look for it. The file
// appears only when complete.
func writeArchive(out, ref string, img v1.Image) error {
	dir, err := os.MkdirTemp("", "flotilla-image-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("oci layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tagOf(ref),
		"io.containerd.image.name":          ref,
	})); err != nil {
		return fmt.Errorf("oci layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// tagOf is the part of ref after the last colon that follows the last slash.
func tagOf(ref string) string {
	for i := len(ref) - 1; i >= 0 && ref[i] != '/'; i-- {
		if ref[i] == ':' {
			return ref[i+1:]
		}
	}
	return "latest"
}

// tarDir packs dir's files (walked in lexical order) into the tar file out.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	walkErr := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if walkErr != nil {
		f.Close()
		return walkErr
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
