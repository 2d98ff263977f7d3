package agent

// Repairing the tool library.
//
// The runtime owns the library alone: /data is 0700 and the database 0600,
// both owned by the runtime's uid (root in the image), while user code runs
// on another uid (65534) and cannot reach them. What the runtime can still
// find wrong, it repairs before it opens the database, and logs:
//
//   - the library's directory missing: created 0700;
//   - the directory or the database files owned by another uid (a volume an
//     older image wrote as uid 1000): taken over with chown (CAP_CHOWN);
//   - the directory's mode not 0700, or a file the owner cannot read and
//     write: set back to 0700 / 0600;
//   - the database corrupt (not a database, or PRAGMA quick_check fails):
//     moved aside to <file>.corrupt-<UTC timestamp> and a fresh one created;
//   - the open database's file removed or replaced: opened again (a fresh
//     library when it is gone).
//
// Each repair is reported once, as a tool.library_repaired event on the
// next execute_python. What it cannot repair (a lock another process holds,
// a directory it may not take over) stays tool.library_unavailable.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared/toollib"
)

// errCorrupt marks a database whose integrity check failed.
var errCorrupt = errors.New("database corrupt")

// libraryFileSuffixes are the files SQLite keeps beside the database.
var libraryFileSuffixes = []string{"", "-wal", "-shm", "-journal"}

// isCorrupt reports whether err says the database file is not a usable
// SQLite database (by result code, not by message).
func isCorrupt(err error) bool {
	if errors.Is(err, errCorrupt) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return true
		}
	}
	return false
}

// isBusy reports whether err is a lock another connection holds.
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// repairOwnershipLocked makes the library's directory (when the runtime
// owns it: l.ownDir) and files the runtime's own, with modes 0700 and
// 0600. It returns what it changed; an error means the library cannot be
// the runtime's alone, and says why.
func (l *library) repairOwnershipLocked() ([]string, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	var done []string
	// fix makes p the runtime's and sets mode when the owner's bits of
	// need are missing (or, with exact, when the mode differs at all).
	fix := func(p string, mode, need fs.FileMode, exact bool, st os.FileInfo) error {
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner information", p)
		}
		if int(sys.Uid) != uid || int(sys.Gid) != gid {
			if err := os.Lchown(p, uid, gid); err != nil {
				return fmt.Errorf("%s is owned by uid %d, the runtime runs as uid %d and cannot take it over: %w", p, sys.Uid, uid, err)
			}
			done = append(done, fmt.Sprintf("%s: owner %d:%d -> %d:%d", p, sys.Uid, sys.Gid, uid, gid))
		}
		if perm := st.Mode().Perm(); perm&need != need || exact && perm != mode {
			if err := os.Chmod(p, mode); err != nil {
				return fmt.Errorf("%s: mode %v: %w", p, st.Mode().Perm(), err)
			}
			done = append(done, fmt.Sprintf("%s: mode %04o -> %04o", p, st.Mode().Perm(), mode))
		}
		return nil
	}
	if l.ownDir {
		dir := filepath.Dir(l.path)
		st, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return done, fmt.Errorf("creating %s: %w", dir, err)
			}
			if l.path == rtproto.LibraryPath {
				// The image makes /data: its absence is damage. A
				// directory of the runtime's own choosing (-library-own-dir)
				// is simply new.
				done = append(done, dir+": created")
			}
			if st, err = os.Lstat(dir); err != nil {
				return done, err
			}
		case err != nil:
			return done, err
		case !st.IsDir():
			return done, fmt.Errorf("%s is not a directory", dir)
		}
		if err := fix(dir, 0o700, 0o700, true, st); err != nil {
			return done, err
		}
	}
	for _, suf := range libraryFileSuffixes {
		p := l.path + suf
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return done, err
		}
		if !st.Mode().IsRegular() {
			return done, fmt.Errorf("%s is not a regular file (%v)", p, st.Mode().Type())
		}
		if err := fix(p, 0o600, 0o600, false, st); err != nil {
			return done, err
		}
	}
	return done, nil
}

// moveAsideLocked renames the database and its companion files to
// <path>.corrupt-<UTC timestamp><suffix> and returns the new name of the
// database.
func (l *library) moveAsideLocked() (string, error) {
	dst := l.path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	for _, suf := range libraryFileSuffixes {
		err := os.Rename(l.path+suf, dst+suf)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("moving the corrupt library aside: %w", err)
		}
	}
	return dst, nil
}

// repairedLocked logs a repair and queues its event for the next call.
func (l *library) repairedLocked(problem error, done []string, movedTo string) {
	if done == nil {
		done = []string{}
	}
	p := map[string]any{"user": l.user, "path": l.path, "repairs": done}
	if problem != nil {
		p["error"] = problem.Error()
	}
	if movedTo != "" {
		p["moved_to"] = movedTo
	}
	l.log.Warn("tool library repaired", "path", l.path, "repairs", done, "moved_to", movedTo, "error", problem)
	l.pending = append(l.pending, toollib.Event{Type: toollib.EventLibraryRepaired, Payload: p})
}

// takePendingLocked returns the queued repair events, once.
func (l *library) takePendingLocked() []toollib.Event {
	evs := l.pending
	l.pending = nil
	return evs
}

// closeLocked closes the open database, if any; the next operation opens
// it again.
func (l *library) closeLocked() {
	if l.db != nil {
		_ = l.db.Close()
		l.db = nil
	}
}

// tightenLocked takes group and other bits off the database files SQLite
// created (with the process umask); not a repair, so not reported.
func (l *library) tightenLocked() {
	for _, suf := range libraryFileSuffixes {
		if st, err := os.Lstat(l.path + suf); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o077 != 0 {
			_ = os.Chmod(l.path+suf, st.Mode().Perm()&0o700)
		}
	}
}

// fileChangedLocked says why the open database's file is no longer the one
// at l.path (removed, or replaced by another file), or "" when it still is.
func (l *library) fileChangedLocked() string {
	st, err := os.Stat(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "the file was removed"
	case err != nil || l.opened == nil:
		return ""
	case !os.SameFile(st, l.opened):
		return "the file was replaced"
	}
	return ""
}
