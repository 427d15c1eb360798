package httpd

import (
	"fmt"
	"os/user"
	"slices"
	"strconv"
)

// PeerPolicy returns the rule for unix-socket peers: root, and members of
// group when it is not empty, act without a password, under their user
// name. Group membership is looked up when a peer connects, so a group
// change takes effect without a restart.
func PeerPolicy(group string) (func(uid, gid uint32) (string, bool), error) {
	want := ""
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			return nil, fmt.Errorf("unix-socket group: %w", err)
		}
		want = g.Gid
	}
	return func(uid, gid uint32) (string, bool) {
		name := "uid:" + strconv.FormatUint(uint64(uid), 10)
		u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
		if err == nil {
			name = u.Username
		}
		if uid == 0 {
			return name, true
		}
		if want == "" {
			return name, false
		}
		if strconv.FormatUint(uint64(gid), 10) == want {
			return name, true
		}
		if u == nil {
			return name, false
		}
		gids, err := u.GroupIds()
		return name, err == nil && slices.Contains(gids, want)
	}, nil
}
