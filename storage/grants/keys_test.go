package grants

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOIDCDueRotationGeneratesOneKey: requests that all find the rotation
// due at once (the JWKS, userinfo, new codes) publish one successor, which
// every one of them sees, and the node generates one key for them, not one
// each.
func TestOIDCDueRotationGeneratesOneKey(t *testing.T) {
	s := Of(openOAuthTestStore(t))
	p := KeyPolicy{Rotation: 10 * time.Hour, PublishAhead: time.Hour, Retain: 2 * time.Hour}
	first, err := s.SigningKeys(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var generated atomic.Int32
	generateSigningKey = func() (*SigningKey, error) { generated.Add(1); return newSigningKey() }
	defer setNow(func() time.Time { return time.Now().Add(9*time.Hour + time.Minute) })()
	defer func() { generateSigningKey = newSigningKey }()

	const callers = 8
	sets := make([][]string, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			k, err := s.SigningKeys(t.Context(), p)
			if err != nil {
				t.Error(err)
				return
			}
			for _, pk := range k.Published {
				sets[i] = append(sets[i], pk.ID)
			}
			slices.Sort(sets[i])
		})
	}
	close(start)
	wg.Wait()
	after, err := s.SigningKeys(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range after.Published {
		want = append(want, k.ID)
	}
	slices.Sort(want)
	if len(want) != 2 || !slices.Contains(want, first.Signer.ID) || after.Signer.ID != first.Signer.ID {
		t.Fatalf("published %v, signer %s; want %s and one successor", want, after.Signer.ID, first.Signer.ID)
	}
	for i, set := range sets {
		if !slices.Equal(set, want) {
			t.Errorf("caller %d saw %v, want %v", i, set, want)
		}
	}
	if n := generated.Load(); n != 1 {
		t.Errorf("%d keys generated for one successor", n)
	}
}
