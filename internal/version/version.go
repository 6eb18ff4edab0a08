// Package version says which Flotilla build is running and which
// Kubernetes release it embeds, from the Go build information (or from
// -ldflags "-X github.com/flotilla-io/flotilla/internal/version.override=v1.2.3").
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// override, when set by the linker, wins over the module version.
var override string

// Kubernetes is the k8s.io/kubernetes release the hub embeds; a test keeps
// it equal to go.mod's requirement (test binaries carry no module list to
// read it from).
const Kubernetes = "v1.37.2"

// Info describes one build.
type Info struct {
	// Flotilla is the version of this build: the linker's override, the
	// module version when built from a tagged module, else a pseudo-version
	// from the VCS revision, else "devel".
	Flotilla string
	// Kubernetes is the version of k8s.io/kubernetes this build embeds.
	Kubernetes string
	// Revision and Modified come from the VCS stamp, when present.
	Revision string
	Modified bool
	// BuildTime is the commit time of Revision (RFC 3339), when known.
	BuildTime string
	GoVersion string
	Platform  string
}

// Get reads the build information of the running binary.
func Get() Info {
	info := Info{Flotilla: "devel", Kubernetes: Kubernetes, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Flotilla = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			case "vcs.time":
				info.BuildTime = s.Value
			}
		}
	}
	if info.Flotilla == "devel" && info.Revision != "" {
		info.Flotilla = "devel-" + shortRevision(info.Revision)
		if info.Modified {
			info.Flotilla += "-dirty"
		}
	}
	if override != "" {
		info.Flotilla = override
	}
	return info
}

// String is the one-line form binaries print for --version.
func (i Info) String() string {
	s := "flotilla " + i.Flotilla + " (kubernetes " + i.Kubernetes + ", " + i.GoVersion + ", " + i.Platform
	if i.Revision != "" {
		s += ", revision " + shortRevision(i.Revision)
		if i.Modified {
			s += "+dirty"
		}
	}
	return s + ")"
}

// KubernetesGitVersion is what the hub's /version reports as gitVersion:
// the embedded Kubernetes release with Flotilla's version as semver build
// metadata (as k3s reports "v1.30.2+k3s1"), so clients that parse the
// Kubernetes version keep working.
func (i Info) KubernetesGitVersion() string {
	return i.Kubernetes + "+flotilla." + buildMetadata(strings.TrimPrefix(i.Flotilla, "v"))
}

// buildMetadata keeps only what semver allows in build metadata
// ([0-9A-Za-z-.]), so a pseudo-version's own "+incompatible" or "+dirty"
// cannot break the Kubernetes version's syntax.
func buildMetadata(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '.':
			return r
		}
		return '-'
	}, s)
}

func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
