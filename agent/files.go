package agent

// The session's workspace (rtproto.FilesDir): the only directory the
// Python children may write (Landlock, runner.Seal.WritePaths), on the
// /workspace tmpfs whose size is the quota (a full tmpfs is ENOSPC: the
// user's code sees OSError, put_file failed_precondition). put_file,
// get_file and list_files serve it to the plugin; after every execution
// the files the call created or changed come back as artifacts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// Caps of the workspace's traffic: one file up or down, one artifact's
// bytes, and all artifacts of one call together (the rest are listed
// with Omitted set: download them with get_file).
const (
	maxFileBytes      = shared.DefaultMaxFileBytes
	maxArtifactBytes  = shared.DefaultMaxFileBytes
	maxArtifactsTotal = 8 << 20
	maxArtifacts      = 64
	childUID          = 65534 // the runner's seal drops to it (runner.Seal.UID 0)
)

// filesDir returns the workspace, creating it the first time: owned by
// the runtime (root), group the children's gid, mode 02770 (setgid: what
// is made in it keeps that group). The children reach it through the
// group; the runtime, which has no CAP_DAC_OVERRIDE, through ownership
// (and reads a child's file through its "other" bits: 0644 under the
// default umask). Not root (tests, a non-root image): left as made.
func (e *executor) filesDir() (string, error) {
	dir := e.files
	if dir == "" {
		dir = filepath.Join(e.workdir, "files")
	}
	e.mkdirMu.Lock()
	defer e.mkdirMu.Unlock()
	made := true
	if err := os.Mkdir(dir, 0o700); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("workspace: %v: %w", err, shared.ErrInternal)
		}
		made = false
	}
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory: %w", dir, shared.ErrInternal)
	}
	if made && os.Geteuid() == 0 {
		if err := shareDir(dir); err != nil {
			return "", fmt.Errorf("workspace: %v: %w", err, shared.ErrInternal)
		}
	}
	return dir, nil
}

// cacheDir returns the libraries' cache directory, creating it the first
// time: matplotlib's config and font cache (MPLCONFIGDIR, pythonEnv),
// seeded from the image's, beside the workspace and not in it, so a
// listing of the workspace shows the user's files only. The children may
// write it (writePaths) as they write the workspace: owned by the runtime,
// the children's group, 02770.
func (e *executor) cacheDir() (string, error) {
	dir := filepath.Join(e.workdir, cacheDirName)
	mpl := filepath.Join(dir, mplConfigDir)
	e.mkdirMu.Lock()
	defer e.mkdirMu.Unlock()
	if st, err := os.Lstat(mpl); err == nil && st.IsDir() {
		return dir, nil
	}
	for _, d := range []string{dir, mpl} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("cache directory: %v: %w", err, shared.ErrInternal)
		}
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			return "", fmt.Errorf("cache directory %s is not a directory: %w", d, shared.ErrInternal)
		}
		if os.Geteuid() == 0 {
			if err := shareDir(d); err != nil {
				return "", fmt.Errorf("cache directory: %v: %w", err, shared.ErrInternal)
			}
		}
	}
	if err := seedMatplotlib(mpl); err != nil {
		return "", fmt.Errorf("cache directory: matplotlib's font cache: %v: %w", err, shared.ErrInternal)
	}
	return dir, nil
}

// mplCacheSeed holds the font cache the data-science image builds
// (Dockerfile): matplotlib walks the system's font directories to build
// one otherwise, which the sandbox refuses.
const mplCacheSeed = "/opt/orqest/matplotlib"

// seedMatplotlib copies the image's matplotlib font cache (regular files
// of mplCacheSeed, when there is one) into dir, readable and writable by
// the children's group.
func seedMatplotlib(dir string) error {
	ents, err := os.ReadDir(mplCacheSeed)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(mplCacheSeed, e.Name()))
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, e.Name())
		if err := os.WriteFile(dst, b, 0o660); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(dst, -1, childUID); err != nil {
				return err
			}
		}
	}
	return nil
}

// cacheDirName is the libraries' cache directory under the runtime's
// working directory (cacheDir); mplConfigDir is matplotlib's in it.
const (
	cacheDirName = "cache"
	mplConfigDir = "matplotlib"
)

// shareDir gives a directory of the workspace to the children's group.
func shareDir(dir string) error {
	if err := os.Lchown(dir, -1, childUID); err != nil {
		return err
	}
	return os.Chmod(dir, 0o2770)
}

// fileState is what a snapshot records of one file.
type fileState struct {
	size int64
	mod  time.Time
}

// snapshot lists the regular files of the workspace (relative,
// slash-separated) without following any link.
func snapshot(dir string) map[string]fileState {
	out := map[string]fileState{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err == nil {
			out[filepath.ToSlash(rel)] = fileState{size: info.Size(), mod: info.ModTime()}
		}
		return nil
	})
	return out
}

// artifacts returns the files of dir created or changed since before, in
// name order, with their bytes while they fit the caps.
func artifacts(dir string, before map[string]fileState) []shared.Artifact {
	after := snapshot(dir)
	var names []string
	for n, st := range after {
		if strings.HasPrefix(n, ".") { // a library's cache (.matplotlib), not the code's output
			continue
		}
		if old, ok := before[n]; !ok || old != st {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) > maxArtifacts {
		names = names[:maxArtifacts]
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	var out []shared.Artifact
	total := 0
	for _, n := range names {
		a := shared.Artifact{Name: n, Size: after[n].size, MIMEType: mimeOf(n, nil)}
		if a.Size > maxArtifactBytes || total+int(a.Size) > maxArtifactsTotal {
			a.Omitted = true
			out = append(out, a)
			continue
		}
		data, err := readRegular(root, n, maxArtifactBytes)
		if err != nil {
			a.Omitted = true
			out = append(out, a)
			continue
		}
		a.Data, a.Size, a.MIMEType = data, int64(len(data)), mimeOf(n, data)
		total += len(data)
		out = append(out, a)
	}
	return out
}

// mimeOf guesses a MIME type from the name's extension, else the content.
func mimeOf(name string, data []byte) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	if data != nil {
		return http.DetectContentType(data)
	}
	return "application/octet-stream"
}

// readRegular reads the regular file name of root (no link followed out of
// root: os.Root), at most limit bytes (more is ErrInvalidArgument).
func readRegular(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileErr(name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fileErr(name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, &shared.FieldError{Field: "path", Reason: fmt.Sprintf("path %q is not a regular file", name)}
	}
	if st.Size() > limit {
		return nil, &shared.FieldError{Field: "path", Reason: fmt.Sprintf("path %q is %d bytes, over the cap of %d", name, st.Size(), limit)}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fileErr(name, err)
	}
	if int64(len(data)) > limit {
		return nil, &shared.FieldError{Field: "path", Reason: fmt.Sprintf("path %q grew over the cap of %d bytes", name, limit)}
	}
	return data, nil
}

// fileErr classes a filesystem error of the workspace.
func fileErr(name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file in the workspace: %w", name, shared.ErrNotFound)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%s: the workspace is full (its quota is the session's workspace_mb): %w", name, shared.ErrFailedPrecondition)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: the runtime may not read it (the code made it readable by its owner only): %w", name, shared.ErrFailedPrecondition)
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENOTDIR):
		return &shared.FieldError{Field: "path", Reason: fmt.Sprintf("path %q goes through a link or a file", name)}
	}
	return fmt.Errorf("%s: %v: %w", name, err, shared.ErrInternal)
}

func infoOf(name string, st fs.FileInfo) shared.FileInfo {
	return shared.FileInfo{Name: name, Size: st.Size(), Mode: uint32(st.Mode().Perm()), ModTime: st.ModTime()}
}

// putFile writes data to name in the workspace (parent directories made),
// owned by the children's uid so that code may overwrite it.
func (e *executor) putFile(name string, data []byte) (shared.FileInfo, error) {
	if err := shared.CheckFilePath("path", name, false); err != nil {
		return shared.FileInfo{}, err
	}
	if len(data) > maxFileBytes {
		return shared.FileInfo{}, &shared.FieldError{Field: "data", Reason: fmt.Sprintf("data is %d bytes, over the cap of %d", len(data), maxFileBytes)}
	}
	dir, err := e.filesDir()
	if err != nil {
		return shared.FileInfo{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return shared.FileInfo{}, fileErr(name, err)
	}
	defer root.Close()
	owned := os.Geteuid() == 0
	if parent := path.Dir(name); parent != "." {
		// One element at a time, so that each directory made is shared.
		cur := ""
		for _, el := range strings.Split(parent, "/") {
			cur = path.Join(cur, el)
			err := root.Mkdir(cur, 0o700)
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return shared.FileInfo{}, fileErr(name, err)
			}
			if err == nil && owned {
				if err := shareDir(filepath.Join(dir, filepath.FromSlash(cur))); err != nil {
					return shared.FileInfo{}, fileErr(name, err)
				}
			}
		}
	}
	// A file there (perhaps the children's, which the runtime may not
	// write) is replaced, not written through.
	if st, err := root.Lstat(name); err == nil {
		if st.IsDir() {
			return shared.FileInfo{}, &shared.FieldError{Field: "path", Reason: fmt.Sprintf("path %q is a directory", name)}
		}
		if err := root.Remove(name); err != nil {
			return shared.FileInfo{}, fileErr(name, err)
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return shared.FileInfo{}, fileErr(name, err)
	}
	if owned {
		err := f.Chown(-1, childUID)
		if err == nil {
			err = f.Chmod(0o660)
		}
		if err != nil {
			f.Close()
			_ = root.Remove(name)
			return shared.FileInfo{}, fileErr(name, err)
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		_ = root.Remove(name) // a partial upload is not left behind
		return shared.FileInfo{}, fileErr(name, err)
	}
	if err := f.Close(); err != nil {
		_ = root.Remove(name)
		return shared.FileInfo{}, fileErr(name, err)
	}
	st, err := root.Lstat(name)
	if err != nil {
		return shared.FileInfo{}, fileErr(name, err)
	}
	return infoOf(name, st), nil
}

// getFile reads name of the workspace.
func (e *executor) getFile(name string) (shared.FileInfo, []byte, error) {
	if err := shared.CheckFilePath("path", name, false); err != nil {
		return shared.FileInfo{}, nil, err
	}
	dir, err := e.filesDir()
	if err != nil {
		return shared.FileInfo{}, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return shared.FileInfo{}, nil, fileErr(name, err)
	}
	defer root.Close()
	data, err := readRegular(root, name, maxFileBytes)
	if err != nil {
		return shared.FileInfo{}, nil, err
	}
	st, err := root.Lstat(name)
	if err != nil {
		return shared.FileInfo{}, nil, fileErr(name, err)
	}
	info := infoOf(name, st)
	info.Size = int64(len(data))
	return info, data, nil
}

// listFiles lists the regular files under sub ("" the whole workspace).
func (e *executor) listFiles(sub string) ([]shared.FileInfo, error) {
	if err := shared.CheckFilePath("path", sub, true); err != nil {
		return nil, err
	}
	dir, err := e.filesDir()
	if err != nil {
		return nil, err
	}
	base := dir
	if sub != "" {
		base = filepath.Join(dir, filepath.FromSlash(sub))
		st, err := os.Lstat(base)
		if err != nil {
			return nil, fileErr(sub, err)
		}
		if !st.IsDir() {
			return nil, &shared.FieldError{Field: "path", Reason: fmt.Sprintf("path %q is not a directory", sub)}
		}
	}
	out := []shared.FileInfo{}
	err = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		st, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, infoOf(filepath.ToSlash(rel), st))
		return nil
	})
	return out, err
}

// fileTools adds put_file, get_file and list_files (agent scope).
func (rt *runtime) fileTools(s *mcp.Server) {
	handle := func(name string, do func(raw json.RawMessage) (any, error)) mcp.ToolHandler {
		return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := rt.authorize(req, rtproto.ScopeAgent); err != nil {
				rt.log.Warn("call refused", "tool", name, "error", err)
				return toolError(classUnauthorized, "%v", err), nil
			}
			res, err := do(req.Params.Arguments)
			if err != nil {
				return toolError(errorClass(err), "%v", err), nil
			}
			text, _ := json.Marshal(res)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
		}
	}
	decode := func(raw json.RawMessage, v any) error {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("arguments: %v: %w", err, shared.ErrInvalidArgument)
		}
		return nil
	}
	s.AddTool(&mcp.Tool{Name: rtproto.ToolPutFile, Description: "Write a file into the session's workspace.", InputSchema: rtproto.FileSchema(true)},
		handle(rtproto.ToolPutFile, func(raw json.RawMessage) (any, error) {
			var a rtproto.PutFileArgs
			if err := decode(raw, &a); err != nil {
				return nil, err
			}
			info, err := rt.exec.putFile(a.Path, a.Data)
			return rtproto.FileResult{File: info}, err
		}))
	s.AddTool(&mcp.Tool{Name: rtproto.ToolGetFile, Description: "Read a file of the session's workspace.", InputSchema: rtproto.FileSchema(false)},
		handle(rtproto.ToolGetFile, func(raw json.RawMessage) (any, error) {
			var a rtproto.GetFileArgs
			if err := decode(raw, &a); err != nil {
				return nil, err
			}
			info, data, err := rt.exec.getFile(a.Path)
			return rtproto.FileResult{File: info, Data: data}, err
		}))
	s.AddTool(&mcp.Tool{Name: rtproto.ToolListFiles, Description: "List the files of the session's workspace.", InputSchema: rtproto.FileSchema(false)},
		handle(rtproto.ToolListFiles, func(raw json.RawMessage) (any, error) {
			var a rtproto.ListFilesArgs
			if err := decode(raw, &a); err != nil {
				return nil, err
			}
			files, err := rt.exec.listFiles(a.Path)
			return rtproto.ListFilesResult{Files: files}, err
		}))
}
