package postgres

import (
	"crypto/ed25519"
	"encoding/hex"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/sqlite"
)

// Routes, overrides, specs and agents written on one node are what the
// other nodes read next: there is no cache to be stale.
func TestConfigAcrossNodes(t *testing.T) {
	ns := openNodes(t, 2, nil, Options{})
	a, b := ns[0], ns[1]
	route := func(pack, node string) host.TaskTypeRoute {
		return host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "sum"}, Pack: pack, Node: node}
	}
	if err := a.SetPackTaskTypes(ctx, "local.p", []host.TaskTypeRoute{route("local.p", "p.one")}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Resolve(ctx, "sum"); err != nil || r.Pack != "local.p" || r.Origin != host.OriginManifest {
		t.Fatalf("node b resolves %+v %v", r, err)
	}
	if err := a.SetTaskTypeOverride(ctx, route("local.q", "q.sum")); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Resolve(ctx, "sum"); err != nil || r.Pack != "local.q" || r.Origin != host.OriginOperator {
		t.Fatalf("node b resolves %+v %v after an override on a", r, err)
	}
	if err := b.RemoveTaskTypeOverride(ctx, "sum"); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Resolve(ctx, "sum"); err != nil || r.Pack != "local.p" {
		t.Fatalf("node a resolves %+v %v after the override was removed on b", r, err)
	}
	if err := a.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "sum", DefaultModel: "m1"}); err != nil {
		t.Fatal(err)
	}
	if spec, err := b.TaskTypeSpec(ctx, "sum"); err != nil || spec.DefaultModel != "m1" {
		t.Fatalf("spec written on a, read on b: %+v %v", spec, err)
	}
	verify(t, b)
}

// Nodes putting one new agent at once: one inserts it, the others say
// they replaced it, and the events say the same.
func TestPutAgentConcurrent(t *testing.T) {
	ns := openNodes(t, 3, nil, Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted := 0
	for _, s := range ns {
		wg.Go(func() {
			replaced, err := s.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}})
			if err != nil {
				t.Error(err)
				return
			}
			if !replaced {
				mu.Lock()
				inserted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if inserted != 1 {
		t.Fatalf("%d puts inserted the agent", inserted)
	}
	fresh := 0
	for _, e := range events(t, ns[0], host.EventFilter{Type: host.EventAgentRegistered}) {
		if d := string(e.Data); d == `{"agent_id":"arc","replaced":false}` {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d events say the agent was new", fresh)
	}
	verify(t, ns[0])
}

// API tokens: created on one node, read, listed and revoked on another;
// an id taken already is refused.
func TestTokensAcrossNodes(t *testing.T) {
	clk := newClock()
	ns := openNodes(t, 2, clk, Options{})
	a, b := ns[0], ns[1]
	exp := clk.Now().Add(time.Hour)
	tok := &auth.Token{ID: "tok1", Name: "ci", Tenant: "acme", Scopes: []auth.Scope{"invoke", "tasks:read"}, SecretHash: "h", CreatedAt: clk.Now(), ExpiresAt: &exp}
	if err := a.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateToken(ctx, tok); err == nil {
		t.Fatal("a second token with the same id was stored")
	}
	got, err := b.Token(ctx, "tok1")
	if err != nil || got.Tenant != "acme" || len(got.Scopes) != 2 || got.Scopes[1] != "tasks:read" || !got.ExpiresAt.Equal(exp) || got.RevokedAt != nil {
		t.Fatalf("%+v %v", got, err)
	}
	clk.Add(time.Second)
	tok2 := *tok
	tok2.ID, tok2.CreatedAt, tok2.ExpiresAt = "tok2", clk.Now(), nil
	if err := b.CreateToken(ctx, &tok2); err != nil {
		t.Fatal(err)
	}
	if all, err := a.Tokens(ctx); err != nil || len(all) != 2 || all[0].ID != "tok2" {
		t.Fatalf("tokens, newest first: %+v %v", all, err)
	}
	rev, err := a.RevokeToken(ctx, "tok1")
	if err != nil || rev.RevokedAt == nil || !rev.RevokedAt.Equal(clk.Now()) {
		t.Fatalf("%+v %v", rev, err)
	}
	clk.Add(time.Second)
	if again, err := b.RevokeToken(ctx, "tok1"); err != nil || !again.RevokedAt.Equal(*rev.RevokedAt) {
		t.Fatalf("a second revocation moved the time: %+v %v", again, err)
	}
	_, err = b.RevokeToken(ctx, "nope")
	wantErr(t, err, host.ErrNotFound)
	_, err = a.Token(ctx, "nope")
	wantErr(t, err, host.ErrNotFound)
	wantErr(t, a.CreateToken(ctx, &auth.Token{ID: "tok3", Tenant: "no such/tenant"}), host.ErrValidation)
}

// The host key seals digests; a node without one has no public key and
// seals nothing.
func TestHostKeySeal(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	ns := openNodes(t, 1, nil, Options{HostKey: key})
	pub, err := ns[0].HostPublicKey()
	if err != nil || pub != hex.EncodeToString(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("%q %v", pub, err)
	}
	seal, err := ns[0].SealDigest(host.BundleFormat, "abc")
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.VerifySeal(seal, host.BundleFormat, "abc"); err != nil {
		t.Fatal(err)
	}
	none := openNodes(t, 1, nil, Options{})[0]
	if pub, err := none.HostPublicKey(); pub != "" || err != nil {
		t.Fatalf("%q %v", pub, err)
	}
	if _, err := none.SealDigest(host.BundleFormat, "abc"); err == nil {
		t.Fatal("sealed without a key")
	}
}

// configStore is what both stores implement of the configuration.
type configStore interface {
	host.TaskTypes
	host.TaskTypeSpecs
	host.Agents
	host.Evidence
}

// The same configuration changes at the same times append the same
// events, hash for hash, on PostgreSQL and SQLite; the refused ones
// append none on either.
func TestConfigEventsMatchSQLite(t *testing.T) {
	clk := newClock()
	pg := openNodes(t, 1, clk, Options{})[0]
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "packrun.db"), sqlite.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	route := func(typ, pack, node string) host.TaskTypeRoute {
		return host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: typ, DefaultModel: "m"}, Pack: pack, Node: node}
	}
	ops := []func(configStore) error{
		func(s configStore) error {
			return s.SetPackTaskTypes(ctx, "local.p", []host.TaskTypeRoute{route("sum", "", "p.sum"), route("tr", "", "p.tr")})
		},
		func(s configStore) error {
			return s.SetPackTaskTypes(ctx, "local.p", []host.TaskTypeRoute{route("tr", "", "p.tr"), route("sum", "", "p.sum")})
		},
		func(s configStore) error { return s.SetTaskTypeOverride(ctx, route("sum", "local.q", "q.sum")) },
		func(s configStore) error { return s.RemoveTaskTypeOverride(ctx, "sum") },
		func(s configStore) error { return s.RemoveTaskTypeOverride(ctx, "sum") },
		func(s configStore) error {
			return s.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "sum", DefaultModel: "m1"})
		},
		func(s configStore) error { return s.RemoveTaskTypeSpec(ctx, "sum") },
		func(s configStore) error { return s.RemoveTaskTypeSpec(ctx, "sum") },
		func(s configStore) error {
			_, err := s.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}})
			return err
		},
		func(s configStore) error {
			_, err := s.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc 2"}})
			return err
		},
		func(s configStore) error {
			_, err := s.PutProfile(ctx, &host.SubagentProfile{ProfileID: "prof"})
			return err
		},
		func(s configStore) error { return s.SetPackTaskTypes(ctx, "local.p", nil) },
	}
	for i, op := range ops {
		clk.Add(time.Millisecond)
		perr, lerr := op(pg), op(lite)
		if (perr == nil) != (lerr == nil) || perr != nil && perr.Error() != lerr.Error() {
			t.Fatalf("op %d: postgres %v, sqlite %v", i, perr, lerr)
		}
	}
	got := events(t, pg, host.EventFilter{})
	want, err := lite.Events(ctx, host.EventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 9 || !reflect.DeepEqual(got, want) {
		for i := range max(len(got), len(want)) {
			if i < len(got) && i < len(want) {
				t.Logf("%d: pg %s %s\n   sqlite %s %s", i, got[i].Type, got[i].Data, want[i].Type, want[i].Data)
			}
		}
		t.Fatalf("the events differ (%d on postgres, %d on sqlite)", len(got), len(want))
	}
}
