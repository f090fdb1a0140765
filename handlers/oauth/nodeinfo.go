package oauth

import (
	"net/http"
	"runtime/debug"
	"strings"
)

// Paths of the NodeInfo documents and the OpenID-style userinfo endpoint.
const (
	NodeInfoWellKnownPath = "/.well-known/nodeinfo"
	NodeInfo20Path        = "/nodeinfo/2.0"
	NodeInfo21Path        = "/nodeinfo/2.1"
	UserinfoPath          = "/oauth/userinfo"
)

// MastodonVersion is the Mastodon API version Hearth's OAuth endpoints
// follow; NodeInfo names it as metadata.upstream.
const MastodonVersion = "4.4.0"

// SoftwareVersion is the version of the Hearth module in the running
// binary (from its build information), or "dev" in a build from a
// working tree.
var SoftwareVersion = func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := bi.Main.Version
	if bi.Main.Path != "github.com/hearthkit/caddy-hearth" {
		v = ""
		for _, d := range bi.Deps {
			if d.Path == "github.com/hearthkit/caddy-hearth" {
				v = d.Version
				if d.Replace != nil && d.Replace.Version != "" {
					v = d.Replace.Version
				}
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return strings.TrimPrefix(v, "v")
}()

// serveNodeInfo serves the NodeInfo discovery document and the 2.0 and 2.1
// documents. Mastodon 4.4 (app/serializers/nodeinfo/serializer.rb) serves
// 2.0 only; 2.1 adds software.repository and homepage. Detectors such as
// megalodon 10.3's (src/detector.ts) read software.name and, for servers
// that are not Mastodon, metadata.upstream. Hearth hosts no posts and does
// not federate, so protocols is empty and localPosts 0.
func (s *Server) serveNodeInfo(w http.ResponseWriter, r *http.Request, path string) {
	base := s.baseURL(r)
	// Mastodon serves /.well-known/* and /nodeinfo/* to any origin.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=1800, public")
	if path == NodeInfoWellKnownPath {
		writeJSON(w, http.StatusOK, map[string]any{"links": []map[string]string{
			{"rel": "http://nodeinfo.diaspora.software/ns/schema/2.0", "href": base + NodeInfo20Path},
			{"rel": "http://nodeinfo.diaspora.software/ns/schema/2.1", "href": base + NodeInfo21Path},
		}})
		return
	}
	members := s.memberCount(r.Context())
	software := map[string]any{"name": "hearth", "version": SoftwareVersion}
	version := "2.0"
	if path == NodeInfo21Path {
		version = "2.1"
		software["repository"] = "https://github.com/hearthkit/caddy-hearth"
		software["homepage"] = "https://github.com/hearthkit/caddy-hearth"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"version":   version,
		"software":  software,
		"protocols": []string{},
		"services":  map[string]any{"outbound": []string{}, "inbound": []string{}},
		"usage": map[string]any{
			"users":      map[string]any{"total": members, "activeMonth": members, "activeHalfyear": members},
			"localPosts": 0,
		},
		"openRegistrations": s.opts.OpenRegistration,
		"metadata": map[string]any{
			"nodeName":        s.opts.InstanceTitle,
			"nodeDescription": s.opts.InstanceDescription,
			"upstream":        map[string]string{"name": "mastodon", "version": MastodonVersion},
		},
	})
}

// serveUserinfo is GET and POST /oauth/userinfo (Mastodon 4.4
// app/controllers/oauth/userinfo_controller.rb: doorkeeper_authorize!
// :profile, require_user!; OAuthUserinfoSerializer).
func (s *Server) serveUserinfo(w http.ResponseWriter, r *http.Request) {
	tok, m, ok := s.bearer(w, r, routeUserinfo)
	if !ok {
		return
	}
	if tok.Allows("openid") && m != nil {
		s.serveOIDCUserinfo(w, r, tok, m)
		return
	}
	if m == nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "This method requires an authenticated user"})
		return
	}
	a := s.accountOf(r, m)
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, map[string]string{
		"iss":                s.baseURL(r) + "/",
		"sub":                a.URI,
		"name":               a.DisplayName,
		"preferred_username": a.Username,
		"profile":            a.URL,
		"picture":            a.Avatar,
	})
}
