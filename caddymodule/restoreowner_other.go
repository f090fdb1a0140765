//go:build !unix

package caddymodule

// storeOwner changes nothing where files have no Unix owner.
func storeOwner(string) (uid, gid int, ok bool) { return 0, 0, false }
