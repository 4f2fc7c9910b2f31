package apply

import (
	"io/fs"
	"syscall"
)

// ownedBy tells whether st belongs to uid and gid (-1: either).
func ownedBy(st fs.FileInfo, uid, gid int) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return (uid < 0 || int(s.Uid) == uid) && (gid < 0 || int(s.Gid) == gid)
}
