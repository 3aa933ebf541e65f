// Package version is custody's one version string, shared by every binary
// (custody, custody-verify), the server's custody_build_info metric and
// the User-Agent of custody's HTTP clients.
//
// The version comes from, in order: Version, when set at link time
// (go build -ldflags "-X github.com/custodylog/custody/internal/version.Version=v1.2.3");
// the module's version when built with go install module@version; else
// "(devel)". The VCS revision, its time and whether the work tree was
// modified come from the Go toolchain's VCS stamping (go build
// -buildvcs=true, the default in a git checkout unless GOFLAGS says
// -buildvcs=false), or from the link-time variables below; without
// either they are absent, never made up.
package version

import (
	"runtime/debug"
	"strings"
)

// Set at link time (scripts/build.sh does), for builds the toolchain
// does not stamp: Version overrides the module version; Revision and
// Modified ("true") stand in for the VCS stamp when there is none (a git
// worktree, or GOFLAGS=-buildvcs=false).
var (
	Version  string
	Revision string
	Modified string
)

// Info is what a build knows about itself.
type Info struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"` // the VCS commit, in full
	Time     string `json:"time,omitempty"`     // the commit's time (RFC 3339)
	Modified bool   `json:"modified,omitempty"` // the work tree had changes
	Go       string `json:"go"`
}

// Get returns this binary's build information.
func Get() Info {
	info := Info{Version: Version, Go: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		info.Go = bi.GoVersion
		if info.Version == "" && bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if info.Revision == "" && Revision != "" {
		info.Revision, info.Modified = Revision, Modified == "true"
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	return info
}

// String is the one-line version: "v1.2.3", or "(devel) 0123456789ab",
// with "+dirty" when the work tree was modified.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if i.Revision != "" && !strings.Contains(i.Version, shortRev(i.Revision)) && !strings.HasPrefix(i.Revision, i.Version) {
		b.WriteString(" " + shortRev(i.Revision))
	}
	if i.Modified {
		b.WriteString("+dirty")
	}
	return b.String()
}

// String is Get().String().
func String() string { return Get().String() }

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
