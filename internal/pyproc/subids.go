package pyproc

import (
	"bufio"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/orqest/sandbox/runner"
)

// SubIDFiles are where SubordinateIDs looks: the subordinate uid and gid
// ranges of each account, and the setuid helpers that write them into a
// user namespace's maps (Debian's uidmap package).
type SubIDFiles struct {
	SubUID, SubGID       string
	NewUIDMap, NewGIDMap string
}

// DefaultSubIDFiles are the system's files.
func DefaultSubIDFiles() SubIDFiles {
	return SubIDFiles{SubUID: "/etc/subuid", SubGID: "/etc/subgid",
		NewUIDMap: "/usr/bin/newuidmap", NewGIDMap: "/usr/bin/newgidmap"}
}

// SubordinateIDs returns the first subordinate uid and gid of the account
// this process runs as, for a child's user namespace to map its ids to, or
// why there are none: the process is root (the runner drops to 65534
// instead), the helpers are not installed setuid root, or the account has
// no range.
func SubordinateIDs(f SubIDFiles) (*runner.SubIDs, error) {
	if os.Geteuid() == 0 {
		return nil, fmt.Errorf("running as root: the runner drops to an unprivileged uid instead")
	}
	for _, h := range []string{f.NewUIDMap, f.NewGIDMap} {
		st, err := os.Stat(h)
		if err != nil {
			return nil, fmt.Errorf("%s not installed (Debian package uidmap): %v", h, err)
		}
		if st.Mode()&os.ModeSetuid == 0 {
			return nil, fmt.Errorf("%s is not setuid", h)
		}
	}
	uid := strconv.Itoa(os.Getuid())
	keys := []string{uid}
	if u, err := user.LookupId(uid); err == nil {
		keys = append(keys, u.Username)
	}
	su, err := firstSubID(f.SubUID, keys)
	if err != nil {
		return nil, err
	}
	sg, err := firstSubID(f.SubGID, keys)
	if err != nil {
		return nil, err
	}
	return &runner.SubIDs{UID: su, GID: sg, NewUIDMap: f.NewUIDMap, NewGIDMap: f.NewGIDMap}, nil
}

// firstSubID returns the first id of the first range in path (lines
// "owner:start:count") whose owner is one of keys (the uid, the user name).
func firstSubID(path string, keys []string) (int, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("no subordinate ids for uid %s: %v", keys[0], err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		parts := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(parts) != 3 {
			continue
		}
		start, err1 := strconv.Atoi(parts[1])
		count, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil || start <= 0 || count < 1 {
			continue
		}
		for _, k := range keys {
			if parts[0] == k {
				return start, nil
			}
		}
	}
	return 0, fmt.Errorf("no subordinate id range for uid %s in %s", keys[0], path)
}
