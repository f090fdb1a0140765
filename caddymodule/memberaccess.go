package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// A member's API tokens and OAuth grants, for the operator: listed and
// revoked through the admin API (below /hearth/members/{username}/) and
// `caddy hearth member tokens|grants`.

func init() {
	registerAdminEndpoint("/hearth/members/{username}/api_tokens/{id}", adminMethods{http.MethodDelete: adminDeleteAPIToken})
	registerAdminEndpoint("/hearth/members/{username}/grants", adminMethods{http.MethodGet: adminListGrants})
	registerAdminEndpoint("/hearth/members/{username}/grants/{app}", adminMethods{http.MethodDelete: adminRevokeGrant})
	memberCommands = append(memberCommands, memberTokensCommand, memberGrantsCommand)
}

// apiTokenListView is an API token as the admin API lists it: never the
// token or its digest.
type apiTokenListView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Origin     string     `json:"origin"`
	Expired    bool       `json:"expired"`
}

// grantView is an application a member has authorized (live OAuth tokens).
type grantView struct {
	AppID        string    `json:"app_id"`
	ClientID     string    `json:"client_id"`
	Name         string    `json:"name"`
	Website      string    `json:"website,omitempty"`
	Scopes       []string  `json:"scopes"`
	AuthorizedAt time.Time `json:"authorized_at"`
}

// adminMember is the member named in the request's path, or the error to
// answer.
func adminMember(r *http.Request, app *App) (*members.Member, error) {
	name := r.PathValue("username")
	m, err := members.Of(app.Store()).Member(r.Context(), name)
	if err != nil {
		return nil, memberError(name, err)
	}
	return m, nil
}

func adminListAPITokens(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	toks, err := apitokens.Of(app.Store()).List(r.Context(), m.ID)
	if err != nil {
		return storeError(err, "API token")
	}
	now := time.Now()
	out := make([]apiTokenListView, 0, len(toks))
	for _, t := range toks {
		out = append(out, apiTokenListView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
			LastUsedAt: t.LastUsedAt, Origin: string(t.Origin), Expired: t.Expired(now)})
	}
	return writeJSON(w, http.StatusOK, out)
}

func adminDeleteAPIToken(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	err = apitokens.Of(app.Store()).Delete(r.Context(), m.ID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return apiError(http.StatusNotFound, "%s has no API token %q", m.Username, clipID(id))
	}
	if err != nil {
		return storeError(err, "API token")
	}
	app.logger.Info("operator revoked an API token", zap.String("member", m.Username), zap.String("token_id", id))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func adminListGrants(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	apps, err := grants.Of(app.Store()).AuthorizedApps(r.Context(), m.ID)
	if err != nil {
		return storeError(err, "grant")
	}
	out := make([]grantView, 0, len(apps))
	for _, a := range apps {
		out = append(out, grantView{AppID: a.App.ID, ClientID: a.App.ClientID, Name: a.App.Name, Website: a.App.Website,
			Scopes: a.Scopes, AuthorizedAt: a.AuthorizedAt})
	}
	return writeJSON(w, http.StatusOK, out)
}

// adminRevokeGrant revokes every OAuth token the member gave the app (named
// by its id or client_id, as listed) and its codes not yet exchanged.
func adminRevokeGrant(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	which := r.PathValue("app")
	apps, err := grants.Of(app.Store()).AuthorizedApps(r.Context(), m.ID)
	if err != nil {
		return storeError(err, "grant")
	}
	var found *grants.App
	for _, a := range apps {
		if a.App.ID == which || a.App.ClientID == which {
			found = a.App
			break
		}
	}
	if found == nil {
		return apiError(http.StatusNotFound, "%s has not authorized an application %q", m.Username, clipID(which))
	}
	if err := grants.Of(app.Store()).RevokeAppForMember(r.Context(), m.ID, found.ClientID); err != nil {
		return storeError(err, "grant")
	}
	app.logger.Info("operator revoked an application's access", zap.String("member", m.Username), zap.String("app_id", found.ID))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// clipID is an id from a request, fit to show in an error.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// memberTokensCommand is `caddy hearth member tokens NAME [--revoke ID]`.
func memberTokensCommand() *cobra.Command {
	return memberListCommand(memberList{
		use:        "tokens <username> [--revoke ID]",
		short:      "Lists a member's API tokens, or revokes one",
		kind:       "api_tokens",
		revoked:    "revoked API token %s of %s",
		revokeHelp: "Revoke the token with this ID (it stops working at once)",
		what:       "tokens",
	}, func(cmd *cobra.Command, uri string) error {
		return printList(cmd, uri, "ID\tNAME\tCREATED\tEXPIRES\tLAST USED\tMADE BY", func(t apiTokenListView) []string {
			expires := "never"
			if t.ExpiresAt != nil {
				expires = t.ExpiresAt.Format(time.DateOnly)
				if t.Expired {
					expires += " (expired)"
				}
			}
			used := "never"
			if t.LastUsedAt != nil {
				used = t.LastUsedAt.Format(time.DateOnly)
			}
			return []string{t.ID, oneLine(t.Name), t.CreatedAt.Format(time.DateOnly), expires, used, t.Origin}
		})
	})
}

// memberGrantsCommand is `caddy hearth member grants NAME [--revoke APP-ID]`.
func memberGrantsCommand() *cobra.Command {
	return memberListCommand(memberList{
		use:        "grants <username> [--revoke APP-ID]",
		short:      "Lists the applications a member has authorized (OAuth), or revokes one",
		kind:       "grants",
		revoked:    "revoked the access of application %s to %s",
		revokeHelp: "Revoke the application with this APP ID: its tokens for the member stop working at once",
		what:       "applications",
	}, func(cmd *cobra.Command, uri string) error {
		return printList(cmd, uri, "APP ID\tNAME\tSCOPES\tAUTHORIZED", func(g grantView) []string {
			return []string{g.AppID, oneLine(g.Name), strings.Join(g.Scopes, " "), g.AuthorizedAt.Format(time.DateOnly)}
		})
	})
}

// memberList describes a member command that lists what the admin API
// has at memberURI(NAME, kind), or with --revoke ID deletes one of them.
type memberList struct {
	use, short, kind string
	// revoked is the line printed after a revocation, of the ID and the
	// username.
	revoked    string
	revokeHelp string
	// what the list holds, for --json's help.
	what string
}

// memberListCommand is the command of l; list prints the list at uri.
func memberListCommand(l memberList, list func(cmd *cobra.Command, uri string) error) *cobra.Command {
	c := &cobra.Command{
		Use:   l.use,
		Short: l.short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if id, _ := cmd.Flags().GetString("revoke"); id != "" {
				return adminDone(cmd, http.MethodDelete, memberURI(args[0], l.kind, url.PathEscape(id)), nil, l.revoked, id, args[0])
			}
			return list(cmd, memberURI(args[0], l.kind))
		},
	}
	c.Flags().String("revoke", "", l.revokeHelp)
	c.Flags().Bool("json", false, "Print the "+l.what+" as JSON")
	return c
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printList gets a list from the admin API at uri and prints it: as JSON
// with --json, else as a table with header's columns, one row a value.
func printList[T any](cmd *cobra.Command, uri, header string, row func(T) []string) error {
	var list []T
	if err := adminJSON(cmd, http.MethodGet, uri, nil, &list); err != nil {
		return err
	}
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		return printJSON(cmd, list)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, v := range list {
		fmt.Fprintln(tw, strings.Join(row(v), "\t"))
	}
	return tw.Flush()
}

// oneLine keeps a name chosen by a member or an app from breaking the
// table: control characters become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
