package buildinfo

import (
	goruntime "runtime"
	"runtime/debug"

	"github.com/packrun/packrun/abi"
)

// Unknown is the value of a field the build did not record (a `go run` or
// `go test` build, or one made with -buildvcs=false).
const Unknown = "unknown"

// Info describes a packrun build.
type Info struct {
	// Version is the main module's version ("dev" for a build from a
	// working tree).
	Version string `json:"version"`
	// Revision, Time and Modified come from the VCS stamp of the build.
	Revision string `json:"revision"`
	Time     string `json:"time"`
	Modified string `json:"modified"` // "true", "false" or "unknown"
	// Go is the Go toolchain that built the binary.
	Go string `json:"go"`
	// Wazero is the version of github.com/tetratelabs/wazero linked in.
	Wazero string `json:"wazero"`
	// ABIVersions are the ABI versions served, newest first.
	ABIVersions []string `json:"abiVersions"`
}

// Set at link time (go build -ldflags "-X
// github.com/packrun/packrun/internal/buildinfo.revision=..."), these
// override what the build recorded: a release build made where the Go
// toolchain cannot stamp the VCS state (-buildvcs=false, a git worktree)
// names its revision this way.
var version, revision, vcsTime, modified string

// WazeroModule is the module path whose version Info.Wazero reports.
const WazeroModule = "github.com/tetratelabs/wazero"

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	info := from(bi)
	for _, o := range []struct {
		dst *string
		v   string
	}{{&info.Version, version}, {&info.Revision, revision}, {&info.Time, vcsTime}, {&info.Modified, modified}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	return info
}

func from(bi *debug.BuildInfo) Info {
	info := Info{Version: "dev", Revision: Unknown, Time: Unknown, Modified: Unknown, Go: goruntime.Version(), Wazero: Unknown}
	for _, v := range abi.Served() {
		info.ABIVersions = append(info.ABIVersions, v.String())
	}
	if bi == nil {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		if s.Value == "" {
			continue
		}
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			if s.Value == "true" || s.Value == "false" {
				info.Modified = s.Value
			}
		}
	}
	for _, d := range bi.Deps {
		if d.Path != WazeroModule {
			continue
		}
		if d.Replace != nil && d.Replace.Version != "" {
			d = d.Replace
		}
		if d.Version != "" {
			info.Wazero = d.Version
		}
	}
	return info
}
