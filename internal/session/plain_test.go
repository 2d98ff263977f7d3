package session

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// TestPausedStore: a saved record comes back as it was, its directory and
// files private; a changed state file, a signature of another backend's
// domain, a copy renamed to another session id and a replaced key are
// refused (ErrPermissionDenied) before anything is decoded; nothing saved
// is ErrSessionNotFound; an id that is not an id never reaches the file
// system; Forget removes it.
func TestPausedStore(t *testing.T) {
	root := filepath.Join(t.TempDir(), "paused")
	store := PausedStore{Root: root, Domain: "test-pause-v1"}
	rec := PausedRecord{Meta: json.RawMessage(`{"user":"alice"}`), User: "alice",
		Globals: map[string]json.RawMessage{"a1": json.RawMessage(`{"x":{"int":"41"}}`)},
		Kept:    []string{"a1/x"}, NotKept: []string{"a1/f"},
		Files: []PausedFile{{Name: "data.csv", Data: []byte("k,v\na,1\n")}}}
	n, err := store.Save("s-1", rec)
	if err != nil || n <= 0 {
		t.Fatalf("Save: %d, %v", n, err)
	}
	for _, p := range []string{root, filepath.Join(root, "s-1")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v, want 0700", p, err, fi.Mode().Perm())
		}
	}
	for _, p := range []string{filepath.Join(root, PausedKeyFile), filepath.Join(root, "s-1", PausedStateFile), filepath.Join(root, "s-1", PausedSigFile)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v, want 0600", p, err, fi.Mode().Perm())
		}
	}
	got, err := store.Load("s-1")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got.User != "alice" || string(got.Globals["a1"]) != string(rec.Globals["a1"]) || !slices.Equal(got.Kept, rec.Kept) ||
		len(got.Files) != 1 || string(got.Files[0].Data) != "k,v\na,1\n" || string(got.Meta) != string(rec.Meta) {
		t.Errorf("Load = %+v, want %+v", got, rec)
	}
	if left, _ := filepath.Glob(filepath.Join(root, ".s-1-*")); len(left) != 0 {
		t.Errorf("Save left its temporary directory: %v", left)
	}

	state := filepath.Join(root, "s-1", PausedStateFile)
	orig, _ := os.ReadFile(state)
	refused := func(what string, id string) {
		t.Helper()
		if _, err := store.Load(id); !errors.Is(err, shared.ErrPermissionDenied) {
			t.Errorf("%s: Load = %v, want ErrPermissionDenied", what, err)
		}
	}
	changed := slices.Clone(orig)
	changed[len(changed)/2] ^= 1
	os.WriteFile(state, changed, 0o600)
	refused("a changed state file", "s-1")
	os.WriteFile(state, orig, 0o600)

	other := PausedStore{Root: root, Domain: "other-pause-v1"}
	if _, err := other.Load("s-1"); !errors.Is(err, shared.ErrPermissionDenied) {
		t.Errorf("another domain: Load = %v, want ErrPermissionDenied", err)
	}
	if err := os.Rename(filepath.Join(root, "s-1"), filepath.Join(root, "s-2")); err != nil {
		t.Fatal(err)
	}
	refused("a state renamed to another session", "s-2")
	os.Rename(filepath.Join(root, "s-2"), filepath.Join(root, "s-1"))
	if _, err := store.Load("s-1"); err != nil {
		t.Fatalf("the untouched state: %v", err)
	}
	key := filepath.Join(root, PausedKeyFile)
	k, _ := os.ReadFile(key)
	os.WriteFile(key, make([]byte, len(k)), 0o600)
	refused("a replaced key", "s-1")
	os.WriteFile(key, k[:8], 0o600)
	if _, err := store.Load("s-1"); !errors.Is(err, shared.ErrInternal) {
		t.Errorf("a short key: Load = %v, want ErrInternal", err)
	}
	os.WriteFile(key, k, 0o600)

	if _, err := store.Load("s-none"); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("nothing saved: Load = %v, want ErrSessionNotFound", err)
	}
	for _, id := range []string{"../x", "", "a/b"} {
		if _, err := store.Save(id, rec); !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("Save(%q) = %v, want ErrInvalidArgument", id, err)
		}
	}
	if _, err := (PausedStore{}).Save("s-1", rec); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("no paused_dir: Save = %v, want ErrFailedPrecondition", err)
	}
	if found, err := store.Forget("s-1"); !found || err != nil {
		t.Errorf("Forget = %v, %v", found, err)
	}
	if found, err := store.Forget("s-1"); found || err != nil {
		t.Errorf("Forget again = %v, %v, want false", found, err)
	}
	if _, err := store.Load("s-1"); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("after Forget: Load = %v, want ErrSessionNotFound", err)
	}
}

// TestNormalizePausedDir: a relative paused_dir is a config error; none
// defaults under the user cache directory, and a plugin without $HOME or
// $XDG_CACHE_HOME (as a host launches it) still configures: under the
// account's home directory, or with no paused_dir, so that only a pause is
// refused.
func TestNormalizePausedDir(t *testing.T) {
	d := "rel/dir"
	if err := NormalizePausedDir("docker", &d, "docker-paused"); err == nil {
		t.Errorf("a relative paused_dir was accepted")
	}
	t.Setenv("XDG_CACHE_HOME", "/var/cache/x")
	d = ""
	if err := NormalizePausedDir("docker", &d, "docker-paused"); err != nil || d != "/var/cache/x/orqest-sandbox/docker-paused" {
		t.Errorf("default = %q, %v", d, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	d = ""
	if err := NormalizePausedDir("docker", &d, "docker-paused"); err != nil {
		t.Fatalf("without HOME: %v", err)
	}
	if d != "" && !filepath.IsAbs(d) {
		t.Errorf("without HOME: %q is not absolute", d)
	}
	if d == "" {
		if _, err := (PausedStore{Root: d}).Save("s-1", PausedRecord{User: "u"}); !errors.Is(err, shared.ErrFailedPrecondition) {
			t.Errorf("no paused_dir: Save = %v, want ErrFailedPrecondition", err)
		}
	}
}
