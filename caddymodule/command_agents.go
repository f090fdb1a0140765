package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/hearthkit/caddy-hearth/handlers/directory"
)

func init() {
	addHearthCommand(agentCommand)
}

// agentCommand manages the agent directory's NIP-05 names under the site's
// nip05_domain: a claim vouches for its agent only once approved here.
func agentCommand() *cobra.Command {
	agent := &cobra.Command{
		Use:   "agent",
		Short: "Approves and releases the agent directory's NIP-05 names",
	}
	names := &cobra.Command{
		Use:   "names",
		Short: "Lists the claims on names under nip05_domain, pending ones first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printList(cmd, "/hearth/agents/names", "NAME\tAGENT\tNPUB\tSTATUS", func(c directory.NameClaim) []string {
				status := "pending"
				switch {
				case c.Approved:
					status = "approved"
				case c.Verified:
					status = "verified"
				}
				return []string{c.ID, c.Agent, c.Npub, status}
			})
		},
	}
	names.Flags().Bool("json", false, "Print the claims as JSON")
	action := func(use, short, done string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " <name>",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var c directory.NameClaim
				if err := adminJSON(cmd, http.MethodPost, "/hearth/agents/names/"+url.PathEscape(args[0])+"/"+use, nil, &c); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s)\n", done, c.ID, c.Npub)
				return nil
			},
		}
	}
	agent.AddCommand(names,
		action("approve", "Approves an agent's claim on a name: it becomes NIP-05 verified and nostr.json lists it", "approved"),
		action("release", "Takes a name from the agent holding it, so another may claim it", "released"))
	return agent
}
