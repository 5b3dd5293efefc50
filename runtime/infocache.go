package runtime

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Preparation is deterministic, so what the load-time probe reads (ABI
// version, pack name, node ids) is a function of the module bytes alone. With
// a cache directory, it is remembered by module digest so a later process
// skips initialising a probe instance (milliseconds for a Go module).

type cachedInfo struct {
	ABIVersion int      `json:"abiVersion"`
	PackName   string   `json:"packName"`
	Nodes      []string `json:"nodes"`
}

func (r *Runtime) infoPath(sha string) string {
	if r.cfg.cacheDir == "" {
		return ""
	}
	return filepath.Join(r.cfg.cacheDir, "packrun-info-v1", wazeroVersion(), sha+".json")
}

// cachedDescribe fills m from the cache; it reports false on any miss or
// doubt, and the caller probes instead.
func (m *Module) cachedDescribe() bool {
	p := m.rt.infoPath(m.info.SHA256)
	if p == "" {
		return false
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 1<<20 {
		return false
	}
	var c cachedInfo
	if json.Unmarshal(b, &c) != nil || c.PackName == "" || len(c.Nodes) == 0 || len(c.Nodes) > maxNodes {
		return false
	}
	nodes := make(map[string]int, len(c.Nodes))
	for i, id := range c.Nodes {
		if _, dup := nodes[id]; dup || id == "" {
			return false
		}
		nodes[id] = i
	}
	m.info.ABIVersion, m.info.PackName, m.info.Nodes, m.nodes = c.ABIVersion, c.PackName, c.Nodes, nodes
	return true
}

// rememberDescribe stores what the probe read; failures only cost a probe
// next time.
func (m *Module) rememberDescribe() {
	p := m.rt.infoPath(m.info.SHA256)
	if p == "" {
		return
	}
	b, err := json.Marshal(cachedInfo{m.info.ABIVersion, m.info.PackName, m.info.Nodes})
	if err != nil || os.MkdirAll(filepath.Dir(p), 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".info-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), p) != nil {
		os.Remove(tmp.Name())
	}
}
