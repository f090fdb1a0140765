package libraryservice

import "testing"

// TestAllowPrivateKeepsFetchLimits: the article fetcher used when private
// addresses are allowed (tests, intranets; Caddyfile allow_private_addresses)
// has the documented limits, 15 s and 5 MiB, like the default one (it used
// to be built in caddymodule with safefetch's own 10 s and 1 MiB).
func TestAllowPrivateKeepsFetchLimits(t *testing.T) {
	for _, allow := range []bool{false, true} {
		o := Options{AllowPrivateAddresses: allow}.withDefaults().Articles.Fetcher.Options()
		if o.AllowPrivate != allow || o.Timeout != DefaultFetchTimeout || o.MaxBytes != DefaultFetchMaxBytes || !o.FollowRedirects {
			t.Errorf("allow=%v: fetcher options %+v, want %v, %d bytes, redirects followed", allow, o, DefaultFetchTimeout, DefaultFetchMaxBytes)
		}
	}
	if DefaultFetchTimeout.Seconds() != 15 {
		t.Errorf("DefaultFetchTimeout = %v; README documents 15 s", DefaultFetchTimeout)
	}
}
