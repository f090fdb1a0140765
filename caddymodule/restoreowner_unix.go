//go:build unix

package caddymodule

import (
	"os"
	"path/filepath"
	"syscall"
)

// storeOwner is the owner a store restored into dir while Caddy is stopped
// should have: that of the store it replaces, else of the directory that
// will hold it. Run as root (sudo), the restore would otherwise leave a
// store only root can open, and Caddy, running as its own user (caddy with
// Debian's package), would not start. Only root changes owners: for anyone
// else the new store is theirs, as the old one had to be to be replaced.
func storeOwner(dir string) (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	for _, p := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		st, isUnix := fi.Sys().(*syscall.Stat_t)
		if !isUnix || (st.Uid == 0 && st.Gid == 0) {
			return 0, 0, false
		}
		return int(st.Uid), int(st.Gid), true
	}
	return 0, 0, false
}
