//go:build libsecp256k1

package directory

import "testing"

// With the libsecp256k1 tag the checks must call the C library directly
// (go-nostr links it in): otherwise they silently fall back to go-nostr's
// slower CheckSignature.
func TestChecksCallLibsecp256k1(t *testing.T) {
	if !secpLinked() {
		t.Fatal("libsecp256k1's functions were not linked: the checks go through go-nostr's CheckSignature")
	}
}
