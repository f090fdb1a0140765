package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The OpenID provider's operator side: the clients the operator registers
// for the site's other apps, and the members' e-mail addresses and groups
// those apps are told about.

func init() {
	registerAdminEndpoint("/hearth/clients", adminMethods{
		http.MethodGet:  adminListClients,
		http.MethodPost: adminCreateClient,
	})
	registerAdminEndpoint("/hearth/clients/{client_id}", adminMethods{http.MethodDelete: adminDeleteClient})
	registerAdminEndpoint("/hearth/members/{username}/email", adminMethods{http.MethodPut: adminSetEmail})
	registerAdminEndpoint("/hearth/members/{username}/groups", adminMethods{http.MethodPut: adminSetGroups})
	addHearthCommand(clientCommand)
	memberCommands = append(memberCommands, memberEmailCommand, memberGroupsCommand)
}

// clientView is an operator client as the admin API shows it; the secret
// only in the answer to its creation.
type clientView struct {
	ClientID               string    `json:"client_id"`
	ClientSecret           string    `json:"client_secret,omitempty"`
	Name                   string    `json:"name"`
	RedirectURIs           []string  `json:"redirect_uris"`
	PostLogoutRedirectURIs []string  `json:"post_logout_redirect_uris,omitempty"`
	Scopes                 []string  `json:"scopes"`
	Public                 bool      `json:"public,omitempty"`
	Pairwise               bool      `json:"pairwise,omitempty"`
	IDTokenAlg             string    `json:"id_token_signed_response_alg"`
	CreatedAt              time.Time `json:"created_at"`
}

func viewClient(a *grants.App, secret string) clientView {
	v := clientView{ClientID: a.ClientID, ClientSecret: secret, Name: a.Name, RedirectURIs: a.RedirectURIs, Scopes: a.Scopes, CreatedAt: a.CreatedAt}
	v.IDTokenAlg = "RS256"
	if a.Client != nil {
		v.PostLogoutRedirectURIs, v.Public, v.Pairwise = a.Client.PostLogoutRedirectURIs, a.Client.Public, a.Client.Pairwise
		if a.Client.IDTokenAlg != "" {
			v.IDTokenAlg = a.Client.IDTokenAlg
		}
	}
	return v
}

func adminListClients(w http.ResponseWriter, r *http.Request, app *App) error {
	list, err := grants.Of(app.Store()).Clients(r.Context())
	if err != nil {
		return storeError(err, "clients")
	}
	out := make([]clientView, 0, len(list))
	for _, a := range list {
		out = append(out, viewClient(a, ""))
	}
	return writeJSON(w, http.StatusOK, out)
}

func adminCreateClient(w http.ResponseWriter, r *http.Request, app *App) error {
	var spec oauth.ClientSpec
	if err := decodeJSONBody(w, r, &spec); err != nil {
		return err
	}
	a, secret, err := oauth.RegisterClient(r.Context(), app.Store(), spec)
	if err != nil {
		return storeError(err, "client")
	}
	return writeJSON(w, http.StatusCreated, viewClient(a, secret))
}

func adminDeleteClient(w http.ResponseWriter, r *http.Request, app *App) error {
	if err := grants.Of(app.Store()).DeleteClient(r.Context(), r.PathValue("client_id")); err != nil {
		return storeError(err, "client")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type setEmailRequest struct {
	Email    string `json:"email"`
	Verified bool   `json:"verified"`
}

func adminSetEmail(w http.ResponseWriter, r *http.Request, app *App) error {
	var req setEmailRequest
	if err := decodeJSONBody(w, r, &req); err != nil {
		return err
	}
	m, err := members.Of(app.Store()).SetEmail(r.Context(), r.PathValue("username"), req.Email, req.Verified)
	if err != nil {
		return storeError(err, "member")
	}
	return writeJSON(w, http.StatusOK, viewMember(m))
}

type setGroupsRequest struct {
	Groups []string `json:"groups"`
}

func adminSetGroups(w http.ResponseWriter, r *http.Request, app *App) error {
	var req setGroupsRequest
	if err := decodeJSONBody(w, r, &req); err != nil {
		return err
	}
	m, err := members.Of(app.Store()).SetGroups(r.Context(), r.PathValue("username"), req.Groups)
	if err != nil {
		return storeError(err, "member")
	}
	return writeJSON(w, http.StatusOK, viewMember(m))
}

func clientCommand() *cobra.Command {
	client := &cobra.Command{
		Use:   "client",
		Short: "Registers, lists and removes the OpenID Connect clients of the site's other apps",
	}
	add := &cobra.Command{
		Use:   "add <name> --redirect-uri URI [--redirect-uri URI...] [--post-logout-redirect-uri URI] [--scopes 'openid profile email groups offline_access'] [--public] [--pairwise] [--id-token-alg ES256]",
		Short: "Registers a client and prints its client_id and secret (shown this once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			spec := oauth.ClientSpec{Name: args[0]}
			spec.RedirectURIs, _ = f.GetStringArray("redirect-uri")
			spec.PostLogoutRedirectURIs, _ = f.GetStringArray("post-logout-redirect-uri")
			if s, _ := f.GetString("scopes"); s != "" {
				spec.Scopes = strings.Fields(s)
			}
			spec.Public, _ = f.GetBool("public")
			spec.Pairwise, _ = f.GetBool("pairwise")
			spec.IDTokenSignedResponseAlg, _ = f.GetString("id-token-alg")
			var v clientView
			if err := adminJSON(cmd, http.MethodPost, "/hearth/clients", spec, &v); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "registered client %s\nclient_id:     %s\n", v.Name, v.ClientID)
			if v.ClientSecret != "" {
				fmt.Fprintf(out, "client_secret: %s\n(the secret is not stored and cannot be shown again)\n", v.ClientSecret)
			} else {
				fmt.Fprintln(out, "public client: no secret; it must use PKCE")
			}
			fmt.Fprintf(out, "scopes:        %s\n", strings.Join(v.Scopes, " "))
			return nil
		},
	}
	add.Flags().StringArray("redirect-uri", nil, "A redirect URI of the app (repeat for several)")
	add.Flags().StringArray("post-logout-redirect-uri", nil, "Where the app may send members back after signing out (repeat for several)")
	add.Flags().String("scopes", "", "The scopes the app may ask for (default: openid profile email groups)")
	add.Flags().Bool("public", false, "A public client (single-page or native app): no secret, PKCE required")
	add.Flags().Bool("pairwise", false, "Give this app its own sub for each member")
	add.Flags().String("id-token-alg", "RS256", "How its ID tokens are signed: RS256, or ES256 if the app accepts it (cheaper)")

	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "Lists the registered clients",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printList(cmd, "/hearth/clients", "CLIENT ID\tNAME\tTYPE\tREDIRECT URIS", func(c clientView) []string {
				kind := "confidential"
				if c.Public {
					kind = "public"
				}
				return []string{c.ClientID, c.Name, kind, strings.Join(c.RedirectURIs, " ")}
			})
		},
	}
	list.Flags().Bool("json", false, "Print the clients as JSON")

	remove := &cobra.Command{
		Use:   "remove <client_id>",
		Short: "Removes a client: its refresh tokens stop at once, its access tokens at their expiry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminDone(cmd, http.MethodDelete, "/hearth/clients/"+url.PathEscape(args[0]), nil, "removed client %s", args[0])
		},
	}
	client.AddCommand(add, list, remove)
	return client
}

func memberEmailCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "email <username> <address> [--unverified]",
		Short: "Sets the e-mail address the site's apps are told about (\"\" removes it)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			unverified, _ := cmd.Flags().GetBool("unverified")
			return adminDone(cmd, http.MethodPut, memberURI(args[0], "email"), setEmailRequest{Email: args[1], Verified: !unverified}, "set the e-mail address of %s", args[0])
		},
	}
	c.Flags().Bool("unverified", false, "Mark the address unverified (the operator has not checked it)")
	return c
}

func memberGroupsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "groups <username> [group...]",
		Short: "Sets a member's groups (none given: removes them all)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			groups := args[1:]
			if groups == nil {
				groups = []string{}
			}
			if err := adminJSON(cmd, http.MethodPut, memberURI(args[0], "groups"), setGroupsRequest{Groups: groups}, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "set the groups of %s: %s\n", args[0], strings.Join(groups, " "))
			return nil
		},
	}
}
