//go:build unix

package devpg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// ErrUnreachable means the server's user cannot enter a folder the server
// needs (its data folder or its binaries).
var ErrUnreachable = errors.New("folder closed to the server's user")

// account is the unprivileged user the server runs as when hookyard runs as
// root: initdb and postgres refuse to run as root.
type account struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
}

// serverAccount returns nil when the server can run as the current user,
// else the `postgres` system user (Debian's package creates it) or, on a
// machine without one, `nobody`.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if errors.As(err, new(user.UnknownUserError)) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("look up user %s: %w", name, err)
		}
		return newAccount(u)
	}
	return nil, errors.New("running as root, and neither user postgres nor nobody exists to run PostgreSQL (it refuses root)")
}

func newAccount(u *user.User) (*account, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	a := &account{name: u.Username, uid: uint32(uid), gid: uint32(gid), groups: []uint32{uint32(gid)}}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("user %s: groups: %w", u.Username, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err == nil && !slices.Contains(a.groups, uint32(g)) {
			a.groups = append(a.groups, uint32(g))
		}
	}
	return a, nil
}

func (a *account) String() string {
	if a == nil {
		return "current user"
	}
	return a.name
}

// sysProcAttr runs a child as a (when set) in a process group of its own.
// The group keeps a terminal's Ctrl-C away from postgres: hookyard stops
// its services first and the server last, instead of the server vanishing
// under services that are still writing.
func (a *account) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if a != nil {
		attr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
	}
	setParentDeathSignal(attr)
	return attr
}

// canEnter applies the kernel's rule for searching a directory: the owner
// bits for the owner, else the group bits for a member, else the others'.
func (a *account) canEnter(mode fs.FileMode, uid, gid uint32) bool {
	perm := mode.Perm()
	switch {
	case uid == a.uid:
		return perm&0o100 != 0
	case slices.Contains(a.groups, gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// reachable checks that a can enter dir and every folder above it. It
// turns the server's "could not open directory: Permission denied" (for
// a data folder under /root, mode 0700) into an error that names the folder.
func (a *account) reachable(dir string) error {
	if a == nil {
		return nil
	}
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dir, err)
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if !a.canEnter(fi.Mode(), st.Uid, st.Gid) {
			return fmt.Errorf("%w: user %s cannot enter %s (mode %v, uid %d): choose a folder it can reach, e.g. under /var/lib",
				ErrUnreachable, a.name, p, fi.Mode().Perm(), st.Uid)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// own gives dir and everything in it to a, when a data folder was made by
// another user (an earlier run as nobody, before the postgres user existed):
// postgres refuses a data folder it does not own.
func (a *account) own(dir string) error {
	if a == nil {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat data folder: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == a.uid && st.Gid == a.gid {
		return nil
	}
	err = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(a.uid), int(a.gid))
	})
	if err != nil {
		return fmt.Errorf("give data folder %s to user %s: %w", dir, a.name, err)
	}
	return nil
}
