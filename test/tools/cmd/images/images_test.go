package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImageRunsTheBinaryAsNonRoot builds an image from a real static binary
// and reads the archive back as containerd would.
func TestImageRunsTheBinaryAsNonRoot(t *testing.T) {
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	out := filepath.Join(dir, "out", "hello.tar")
	err := run([]string{"--binary", bin, "--repository", "ghcr.io/flotilla-io/hello", "--tag", "v1.2.3",
		"--revision", "abc123", "--created", "1700000000", "--out", out}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	img := readArchive(t, out, "ghcr.io/flotilla-io/hello:v1.2.3")
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Config.User != "65532:65532" || !cmp.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/hello"}) {
		t.Errorf("config: os %q user %q entrypoint %q; want linux, 65532:65532, [/usr/local/bin/hello]", cf.OS, cf.Config.User, cf.Config.Entrypoint)
	}
	for k, want := range map[string]string{"org.opencontainers.image.version": "v1.2.3", "org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.created": "2023-11-14T22:13:20Z"} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	files := layerFiles(t, img)
	if got := files["usr/local/bin/hello"]; got != 0o755 {
		t.Errorf("binary mode %o, want 755 (files: %v)", got, files)
	}
	if _, ok := files["etc/passwd"]; !ok {
		t.Errorf("no etc/passwd naming the non-root user: %v", files)
	}

	// Same input, same image: builds are reproducible.
	again := filepath.Join(dir, "again.tar")
	if err := run([]string{"--binary", bin, "--repository", "ghcr.io/flotilla-io/hello", "--tag", "v1.2.3",
		"--revision", "abc123", "--created", "1700000000", "--out", again}, io.Discard); err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := readArchive(t, again, "ghcr.io/flotilla-io/hello:v1.2.3").Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s and %s", d1, d2)
	}
}

func TestRefusesDynamicBinariesAndMissingFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.tar")
	tests := map[string][]string{
		"dynamic":   {"--binary", "/bin/sh", "--repository", "r", "--tag", "t", "--out", out},
		"no binary": {"--repository", "r", "--tag", "t", "--out", out},
		"missing":   {"--binary", "/does/not/exist", "--repository", "r", "--tag", "t", "--out", out},
		"no out":    {"--binary", "/bin/sh", "--repository", "r", "--tag", "t"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			if err := run(args, io.Discard); err == nil {
				t.Fatal("accepted")
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("wrote %s anyway", out)
			}
		})
	}
}

// buildStatic compiles a tiny static program named hello into dir.
func buildStatic(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	must(t, os.MkdirAll(src, 0o755))
	must(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() { println(\"hi\") }\n"), 0o644))
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// readArchive unpacks an oci-archive and returns the image named ref.
func readArchive(t *testing.T, archive, ref string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	must(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		target := filepath.Join(dir, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			must(t, os.MkdirAll(target, 0o755))
			continue
		}
		data, err := io.ReadAll(tr)
		must(t, err)
		must(t, os.WriteFile(target, data, 0o644))
	}
	idx, err := layout.ImageIndexFromPath(dir)
	must(t, err)
	m, err := idx.IndexManifest()
	must(t, err)
	for _, d := range m.Manifests {
		if d.Annotations["io.containerd.image.name"] == ref {
			img, err := idx.Image(d.Digest)
			must(t, err)
			return img
		}
	}
	t.Fatalf("%s not in the archive's index: %+v", ref, m.Manifests)
	return nil
}

// layerFiles maps each regular file and directory of the image to its mode.
func layerFiles(t *testing.T, img v1.Image) map[string]int64 {
	t.Helper()
	layers, err := img.Layers()
	must(t, err)
	files := map[string]int64{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		must(t, err)
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			must(t, err)
			files[hdr.Name] = hdr.Mode
		}
		rc.Close()
	}
	return files
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
