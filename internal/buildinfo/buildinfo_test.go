package buildinfo

import (
	"reflect"
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{"no build info", nil, Info{Version: "dev", Revision: Unknown, Time: Unknown, Modified: Unknown, Wazero: Unknown}},
		{"go run, no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Deps: []*debug.Module{{Path: WazeroModule, Version: "v1.12.0"}}},
			Info{Version: "dev", Revision: Unknown, Time: Unknown, Modified: Unknown, Go: "go1.26.8", Wazero: "v1.12.0"}},
		{"stamped release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}},
			Deps:     []*debug.Module{{Path: WazeroModule, Version: "v1.12.0", Replace: &debug.Module{Path: "../wazero", Version: "v1.12.1"}}}},
			Info{Version: "v0.4.0", Revision: "abc123", Time: "2026-01-02T03:04:05Z", Modified: "true", Go: "go1.26.8", Wazero: "v1.12.1"}},
		{"garbage modified flag", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "maybe"}}},
			Info{Version: "dev", Revision: Unknown, Time: Unknown, Modified: Unknown, Go: "go1.26.8", Wazero: Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := from(tc.bi)
			if tc.want.Go == "" {
				tc.want.Go = got.Go // the toolchain running the test
			}
			if len(got.ABIVersions) == 0 {
				t.Error("no ABI versions")
			}
			got.ABIVersions = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
