package packrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// InvokeRequest is one invocation of a node: dispatch.InvokeRequest, the
// one request type from the API down to the dispatcher (its Pack field is
// set from the target the Invoke methods take).
type InvokeRequest = dispatch.InvokeRequest

// Invocation is a recorded invocation: the evidence record and the
// runtime's result (logs, stdout, stderr, events, timing).
type Invocation struct {
	Attempt *host.Attempt
	Result  *runtime.Result
	// Local is the pack project directory run unsigned from its sources
	// (a directory with a pack.json, or a module its pack.json lists): not
	// verified and not installed. "" otherwise.
	Local string
}

// check validates what can be checked before anything runs: a refusal
// is ErrUsage.
func check(req *InvokeRequest) error {
	if err := req.Check(); err != nil {
		return usageErr("%v", err)
	}
	return nil
}

// Invoke runs one node of target and records the attempt. target is a
// module file (.wasm, or any file that is not a .pack or .tgz), a pack
// file (.pack, or an openwop .tgz, verified against the trust policy
// first, with req.Trust) or an installed pack NAME, NAME@VERSION or
// NAME@RANGE (the newest matching version runs).
//
// What the node did (completed, suspended, failed, breached a limit) is in
// the Invocation, not the error: the error is for invocations that could
// not run (a bad request, a module refused at load, an unknown pack or
// node, the store failing).
func (h *Host) Invoke(ctx context.Context, target string, req InvokeRequest) (*Invocation, error) {
	dir, local, err := localProject(target)
	if err != nil {
		return nil, err
	}
	if local {
		if err := check(&req); err != nil {
			return nil, err
		}
		return h.invokeProject(ctx, dir, req)
	}
	kind, err := targetKind(target)
	if err != nil {
		return nil, err
	}
	// Checked once, before the module is read or the pack verified.
	if err := check(&req); err != nil {
		return nil, err
	}
	switch kind {
	case targetModule:
		wasm, err := ReadModule(target)
		if err != nil {
			return nil, err
		}
		return h.invokeModule(ctx, wasm, target, req)
	case targetPackFile:
		_, arch, err := h.VerifyFile(ctx, target, req.Trust)
		if err != nil {
			return nil, err
		}
		return h.invokeArchive(ctx, arch, req)
	}
	return h.invokePack(ctx, target, req)
}

type targetKindT int

const (
	targetInstalled targetKindT = iota
	targetModule
	targetPackFile
)

// targetKind tells what an invoke target names. A directory is neither a
// module nor a pack: it is refused with what to do instead.
func targetKind(target string) (targetKindT, error) {
	if strings.HasSuffix(target, ".pack") || strings.HasSuffix(target, ".tgz") {
		return targetPackFile, nil
	}
	fi, err := os.Stat(target)
	switch {
	case err == nil && fi.IsDir():
		return 0, usageErr("%s is a directory: invoke its module (a .wasm file) or pack it first (packrun pack %s)", target, target)
	case err == nil:
		return targetModule, nil
	case strings.HasSuffix(target, ".wasm") || strings.ContainsAny(target, `/\`):
		return 0, notFound("%s: no such file", target)
	}
	return targetInstalled, nil
}

// localProject tells whether target names a pack project to run unsigned
// from its sources, and its directory: a directory holding a pack.json, or
// a module file that the pack.json beside it lists and whose manifest grants
// services (run as a bare module it would be granted nothing, so a scaffold's
// node.wasm failed access_denied). Other modules stay bare modules.
func localProject(target string) (string, bool, error) {
	if strings.HasSuffix(target, ".pack") || strings.HasSuffix(target, ".tgz") {
		return "", false, nil
	}
	fi, err := os.Stat(target)
	if err != nil {
		return "", false, nil // targetKind reports it
	}
	if fi.IsDir() {
		_, err := os.Stat(filepath.Join(target, packs.ManifestName))
		return target, err == nil, nil
	}
	dir := filepath.Dir(target)
	b, err := ReadFile(filepath.Join(dir, packs.ManifestName), packs.DefaultLimits().ManifestBytes)
	if err != nil {
		return "", false, nil // no readable pack.json beside it: a bare module
	}
	m, err := packs.DecodeManifest(b)
	if err != nil || len(m.Grants.Services) == 0 {
		return "", false, nil
	}
	for _, mod := range m.Runtime.Modules {
		if filepath.Clean(filepath.Join(dir, filepath.FromSlash(mod.Path))) == filepath.Clean(target) {
			return dir, true, nil
		}
	}
	return "", false, nil
}

// invokeProject packs the project in dir in memory, unsigned, and runs one
// node of it with the manifest's grants and limits (Invocation.Local says
// so). A module that does not match pack.json is refused with what to run.
func (h *Host) invokeProject(ctx context.Context, dir string, req InvokeRequest) (*Invocation, error) {
	src, err := packs.Collect(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (build the project first: packrun build %s)", err, dir)
	}
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		return nil, err
	}
	arch, err := packs.Read(bytes.NewReader(buf.Bytes()), packs.DefaultLimits())
	if err != nil {
		return nil, err
	}
	inv, err := h.invokeArchive(ctx, arch, req)
	if inv != nil {
		inv.Local = dir
	}
	return inv, err
}

// InvokePack runs one node of the installed pack ref names (NAME,
// NAME@VERSION or NAME@RANGE) and records the attempt.
func (h *Host) InvokePack(ctx context.Context, ref string, req InvokeRequest) (*Invocation, error) {
	if err := check(&req); err != nil {
		return nil, err
	}
	return h.invokePack(ctx, ref, req)
}

func (h *Host) invokePack(ctx context.Context, ref string, req InvokeRequest) (*Invocation, error) {
	req.Pack = ref
	_, d, err := h.engine(ctx)
	if err != nil {
		return nil, err
	}
	att, res, err := d.Invoke(ctx, req)
	if err != nil {
		return nil, err
	}
	return &Invocation{Attempt: att, Result: res}, nil
}

// InvokeArchive runs one node of a pack archive (one the caller verified:
// see VerifyFile) and records the attempt.
func (h *Host) InvokeArchive(ctx context.Context, arch *packs.Archive, req InvokeRequest) (*Invocation, error) {
	if err := check(&req); err != nil {
		return nil, err
	}
	return h.invokeArchive(ctx, arch, req)
}

func (h *Host) invokeArchive(ctx context.Context, arch *packs.Archive, req InvokeRequest) (*Invocation, error) {
	req.Pack = ""
	_, d, err := h.engine(ctx)
	if err != nil {
		return nil, err
	}
	att, res, err := d.InvokeArchive(ctx, arch, req)
	if err != nil {
		return nil, err
	}
	return &Invocation{Attempt: att, Result: res}, nil
}

// InvokeModule runs one node of a bare module (no pack: nothing is
// granted) and records the attempt. The module's bytes are kept in the
// home, by digest, so the attempt can be replayed. name identifies the
// module in errors.
func (h *Host) InvokeModule(ctx context.Context, wasm []byte, name string, req InvokeRequest) (*Invocation, error) {
	if err := check(&req); err != nil {
		return nil, err
	}
	return h.invokeModule(ctx, wasm, name, req)
}

func (h *Host) invokeModule(ctx context.Context, wasm []byte, name string, req InvokeRequest) (*Invocation, error) {
	rt, d, err := h.engine(ctx)
	if err != nil {
		return nil, err
	}
	m, err := rt.Load(ctx, wasm, dispatch.BareLoadOptions(name, req.Limits))
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	if err := h.rememberModule(wasm); err != nil {
		return nil, err
	}
	att, res, err := d.InvokeModule(ctx, m, req)
	if err != nil {
		return nil, err
	}
	return &Invocation{Attempt: att, Result: res}, nil
}

// modules keeps the bytes of bare modules invoked, by digest, so their
// attempts can be replayed.
func (h *Host) modules() blobs.Dir {
	return blobs.Dir{Path: filepath.Join(h.home, "modules", "sha256"), TmpPrefix: ".tmp-"}
}

// rememberModule stores a bare module's bytes durably before its attempt
// is recorded: an attempt that names a module must be replayable.
func (h *Host) rememberModule(wasm []byte) error {
	d := h.modules()
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return fmt.Errorf("keep module for replay: %w", err)
	}
	if _, err := d.Put(wasm); err != nil {
		return fmt.Errorf("keep module for replay: %w", err)
	}
	return nil
}

// ReadModule reads a module file. One larger than the host's module size
// limit is refused (a *runtime.LoadError with code module_limit), found
// without reading it; a missing file wraps ErrNotFound.
func ReadModule(path string) ([]byte, error) {
	limit := runtime.DefaultModuleLimits().ModuleBytes
	tooBig := func(observed int64) error {
		se := &runtime.ShapeError{Limit: "module bytes", Max: int64(limit), Observed: observed}
		return &runtime.LoadError{Code: runtime.CodeModuleLimit, Module: path, Msg: se.Error(), Err: se}
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > int64(limit) {
		return nil, tooBig(fi.Size())
	}
	b, err := ReadFile(path, int64(limit))
	if _, ok := errors.AsType[*TooLargeError](err); ok { // it grew while being read
		return nil, tooBig(int64(limit) + 1)
	}
	return b, err
}

// InspectModule loads the module file at path and describes it (ABI, pack
// name, nodes, imports, exports, memory). A module refused at load is a
// *runtime.LoadError.
func (h *Host) InspectModule(ctx context.Context, path string) (runtime.ModuleInfo, error) {
	wasm, err := ReadModule(path)
	if err != nil {
		return runtime.ModuleInfo{}, err
	}
	rt, err := h.Runtime(ctx)
	if err != nil {
		return runtime.ModuleInfo{}, err
	}
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{Name: path})
	if err != nil {
		return runtime.ModuleInfo{}, err
	}
	defer m.Close(ctx)
	return m.Info(), nil
}

// Describe says what this host serves: ABI versions, import namespaces,
// default and maximum limits, module limits, engine.
func (h *Host) Describe(ctx context.Context) (runtime.HostInfo, error) {
	rt, err := h.Runtime(ctx)
	if err != nil {
		return runtime.HostInfo{}, err
	}
	return rt.Host(), nil
}
