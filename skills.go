package packrun

import (
	"context"

	"github.com/packrun/packrun/packs"
)

// Skills lists the installed skills: the skill nodes of every installed
// pack's newest version (the version its task types route to), with their
// SkillManifest (the agent runtime schema §4), by pack name then node order.
func (h *Host) Skills(ctx context.Context) ([]packs.InstalledSkill, error) {
	all, err := h.index.List(ctx)
	if err != nil {
		return nil, err
	}
	out := []packs.InstalledSkill{}
	for i, p := range all {
		if i > 0 && all[i-1].Rec.Name == p.Rec.Name {
			continue // an older version
		}
		out = append(out, p.Manifest.Skills()...)
	}
	return out, nil
}
