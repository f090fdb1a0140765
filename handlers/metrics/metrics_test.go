package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Registering twice in one registry (two apps of a config, or a retried
// provision) is not an error, and every collector is named hearth_*.
func TestRegisterTwiceAndNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for range 2 {
		if err := Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	TokenIssued("client_credentials")
	SignIn(SignInFailure)
	RateLimited(LimitSignIn)
	StoreSynced(0, nil)
	AppRegistered()
	TokenError("invalid_grant")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 6 {
		t.Errorf("%d metric families, want 6", len(families))
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "hearth_") {
			t.Errorf("metric %s is not named hearth_*", f.GetName())
		}
	}
}
