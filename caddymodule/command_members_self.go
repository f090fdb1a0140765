package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// memberSelfCommands are the `caddy hearth member` commands of member
// self-service: reset-link and sessions.
func memberSelfCommands() []*cobra.Command {
	reset := &cobra.Command{
		Use:   "reset-link <username>",
		Short: "Prints a one-time link with which a member sets a new password",
		Long: `Prints a one-time link https://<site>/auth/reset/<token> for a member who
forgot their password. Give it to the member privately: whoever has it can
set the password until it is used or expires. Using it ends all the
member's sessions. A member with two-factor sign-in must also enter a code
or a recovery code there, unless the link was made with --disable-2fa
(which turns two-factor sign-in off when the link is used). With
--revoke-access, using the link also revokes the member's API tokens and
OAuth grants: use it when the account may be compromised, as a new password
alone leaves them working.

The site's address comes from --site, else from the --config file (the
base_url of hearth_oauth, else the host of the site that serves Hearth).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			expires, _ := cmd.Flags().GetString("expires")
			disable, _ := cmd.Flags().GetBool("disable-2fa")
			revoke, _ := cmd.Flags().GetBool("revoke-access")
			site, _ := cmd.Flags().GetString("site")
			if _, err := parseLifetime(expires); err != nil {
				return fmt.Errorf("--expires %q: use a duration such as 24h or 3d", expires)
			}
			base, err := siteURL(cmd, site)
			if err != nil {
				return err
			}
			var out resetLinkView
			if err := adminJSON(cmd, http.MethodPost, memberURI(args[0], "reset_link"),
				resetLinkRequest{Expires: expires, DisableTwoFactor: disable, RevokeAccess: revoke}, &out); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, base+out.Path)
			fmt.Fprintf(w, "works once, until %s", out.ExpiresAt.Local().Format("2006-01-02 15:04 MST"))
			switch {
			case out.DisableTwoFactor:
				fmt.Fprint(w, "; using it turns two-factor sign-in off")
			case out.TwoFactor:
				fmt.Fprint(w, "; the member also needs a code from their authenticator app or a recovery code (or make a link with --disable-2fa)")
			}
			if out.RevokeAccess {
				fmt.Fprint(w, "; using it revokes the member's API tokens and OAuth grants")
			}
			fmt.Fprintln(w)
			return nil
		},
	}
	reset.Flags().String("expires", "24h", "How long the link works: a duration such as 24h or 3d, at most 7d")
	reset.Flags().Bool("disable-2fa", false, "Using the link also turns the member's two-factor sign-in off")
	reset.Flags().Bool("revoke-access", false, "Using the link also revokes the member's API tokens and OAuth grants (a compromised account)")
	reset.Flags().String("site", "", "The site's address, such as https://example.org")

	sessions := &cobra.Command{
		Use:   "sessions <username>",
		Short: "Lists a member's web sessions; --end ID or --end-all signs them out",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			end, _ := cmd.Flags().GetString("end")
			all, _ := cmd.Flags().GetBool("end-all")
			w := cmd.OutOrStdout()
			switch {
			case end != "" && all:
				return errors.New("give --end ID or --end-all, not both")
			case end != "":
				return adminDone(cmd, http.MethodDelete, memberURI(args[0], "sessions", url.PathEscape(end)), nil, "ended session %s of %s", end, args[0])
			case all:
				var out struct{ Ended int }
				if err := adminJSON(cmd, http.MethodDelete, memberURI(args[0], "sessions"), nil, &out); err != nil {
					return err
				}
				fmt.Fprintf(w, "ended %d session(s) of %s\n", out.Ended, args[0])
				return nil
			}
			return printList(cmd, memberURI(args[0], "sessions"), "ID\tDEVICE\tADDRESS\tLAST SEEN\tSIGNED IN", func(s sessionView) []string {
				return []string{s.ID, orDash(s.Device), orDash(s.Address),
					s.LastSeenAt.Local().Format(time.DateTime), s.CreatedAt.Local().Format(time.DateTime)}
			})
		},
	}
	sessions.Flags().String("end", "", "End the session with this ID (from the list)")
	sessions.Flags().Bool("end-all", false, "End every session of the member")
	sessions.Flags().Bool("json", false, "Print the sessions as JSON")
	return []*cobra.Command{reset, sessions}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// siteURL is the site's base URL for links: --site, else derived from the
// --config file (or the Caddyfile in the current directory).
func siteURL(cmd *cobra.Command, site string) (string, error) {
	if site != "" {
		u, err := url.Parse(site)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", fmt.Errorf("--site must be scheme://host[:port], such as https://example.org; got %q", site)
		}
		return u.Scheme + "://" + u.Host, nil
	}
	cfgJSON, err := commandConfig(cmd)
	if err != nil || len(cfgJSON) == 0 {
		return "", errors.New("cannot tell the site's address: pass --site https://your.site (or --config with the site's Caddyfile)")
	}
	base, ok := siteOfConfig(cfgJSON)
	if !ok {
		return "", errors.New("the config names no site serving Hearth: pass --site https://your.site")
	}
	return base, nil
}

// siteOfConfig finds the site serving Hearth in a Caddy JSON config: the
// base_url of a hearth_oauth handler, else the first host matched by a
// route whose handlers include a Hearth one, with the scheme and port its
// server listens on. The scheme is the one Caddy will serve: plain HTTP on
// the http_port, with automatic HTTPS off, and for a host automatic HTTPS
// skips, which is how the Caddyfile adapter writes an http:// site on
// another port (Caddyfile.example's http://localhost:8080).
func siteOfConfig(cfgJSON []byte) (string, bool) {
	var cfg struct {
		Apps struct {
			HTTP struct {
				HTTPPort int `json:"http_port"`
				Servers  map[string]struct {
					Listen         []string          `json:"listen"`
					Routes         []json.RawMessage `json:"routes"`
					AutomaticHTTPS *struct {
						Disable bool     `json:"disable"`
						Skip    []string `json:"skip"`
					} `json:"automatic_https"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if json.Unmarshal(cfgJSON, &cfg) != nil {
		return "", false
	}
	var baseURL string
	findBaseURL(cfgJSON, &baseURL)
	if baseURL != "" {
		return strings.TrimSuffix(baseURL, "/"), true
	}
	for _, srv := range cfg.Apps.HTTP.Servers {
		for _, raw := range srv.Routes {
			if !hearthHandler.Match(raw) {
				continue
			}
			var route struct {
				Match []struct {
					Host []string `json:"host"`
				} `json:"match"`
			}
			if json.Unmarshal(raw, &route) != nil {
				continue
			}
			for _, m := range route.Match {
				for _, h := range m.Host {
					if h == "" || strings.Contains(h, "*") {
						continue
					}
					port := ""
					if len(srv.Listen) > 0 {
						if _, p, err := net.SplitHostPort(strings.TrimPrefix(srv.Listen[0], "tcp/")); err == nil {
							port = p
						}
					}
					httpPort := "80"
					if cfg.Apps.HTTP.HTTPPort != 0 {
						httpPort = fmt.Sprint(cfg.Apps.HTTP.HTTPPort)
					}
					scheme, defaultPort := "https", "443"
					if port == httpPort || (srv.AutomaticHTTPS != nil &&
						(srv.AutomaticHTTPS.Disable || slices.Contains(srv.AutomaticHTTPS.Skip, h))) {
						scheme, defaultPort = "http", "80"
					}
					hostport := h
					if port != "" && port != defaultPort {
						hostport = net.JoinHostPort(h, port)
					}
					return scheme + "://" + hostport, true
				}
			}
		}
	}
	return "", false
}

// findBaseURL sets *out to the base_url of the first hearth_oauth handler
// anywhere in v (JSON).
func findBaseURL(raw []byte, out *string) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		if *out != "" {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			if x["handler"] == "hearth_oauth" {
				if b, ok := x["base_url"].(string); ok && b != "" {
					*out = b
					return
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
}
