package oauth

import (
	"net/url"
	"strings"
	"testing"
)

// maxFormParams is url.ParseQuery's default limit on parameters.
const maxFormParams = 10000

// parseForm reads a token request's form body as net/http would: the same
// values, the same bodies refused as unparsable, and a parameter sent twice
// refused.
func TestParseFormAgreesWithParseQuery(t *testing.T) {
	for _, form := range []string{
		"",
		"grant_type=client_credentials&client_id=abc&client_secret=hcs_x-y_z",
		"scope=read+write%3Astatuses&redirect_uri=urn%3Aietf%3Awg%3Aoauth%3A2.0%3Aoob",
		"a=1&&b=&=c&d",
		"a=%zz",
		"a=1;b=2",
		"a%3Bb=1",
		"%=1&b=2",
		"k%20ey=v%2Bal+ue",
		"x=" + strings.Repeat("&", maxFormParams),
		"x=1" + strings.Repeat("&", maxFormParams-2),
	} {
		want, wantErr := url.ParseQuery(form)
		got := map[string]string{}
		err := parseForm(form, got)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%.40q: error %v, url.ParseQuery's %v", form, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%.40q: %d parameters, want %d", form, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v[0] {
				t.Errorf("%.40q: %q = %q, want %q", form, k, got[k], v[0])
			}
		}
	}
	err := parseForm("a=1&b=2&a=1", map[string]string{})
	if err == nil || err.Code != "invalid_request" || !strings.Contains(err.Description, "The parameter a was sent more than once.") {
		t.Errorf("a parameter sent twice: %+v", err)
	}
}
