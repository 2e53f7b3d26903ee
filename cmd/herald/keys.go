package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// runKey administers a tenant's API keys from the operator's side:
//
//	herald key list   --tenant T
//	herald key create --tenant T [--name N]
//	herald key revoke --tenant T [--force] KEY_ID
//
// T is a tenant id (t_...) or name. Revoking the tenant's last active key needs
// --force (the API refuses it always). A key revoked here is refused by a running
// API within its auth cache TTL (30 s).
func runKey(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	fs := newFlagSet("key " + args[0])
	tenant := fs.String("tenant", "", "tenant id (t_...) or name (required)")
	var name *string
	var force *bool
	switch args[0] {
	case "list":
	case "create":
		name = fs.String("name", "", "a label for the key")
	case "revoke":
		force = fs.Bool("force", false, "revoke the tenant's last active key too")
	default:
		return errUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if strings.TrimSpace(*tenant) == "" {
		return fmt.Errorf("key %s needs --tenant", args[0])
	}
	switch {
	case args[0] == "revoke" && fs.NArg() != 1:
		return fmt.Errorf("key revoke takes one key id after the flags (herald key list shows them)")
	case args[0] != "revoke" && fs.NArg() != 0:
		return fmt.Errorf("key %s takes no arguments", args[0])
	}

	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	t, err := findTenant(ctx, st, *tenant)
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		keys, err := st.ListAPIKeys(ctx, t.ID)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tCREATED\tLAST USED\tREVOKED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, orDash(k.Name), k.CreatedAt.UTC().Format(time.RFC3339),
				timeOrDash(k.LastUsedAt), timeOrDash(k.RevokedAt))
		}
		return tw.Flush()
	case "create":
		var k store.APIKey
		var key string
		err := audited(ctx, st, t.ID, api.AuditAPIKeyCreate, "", map[string]any{"name": strings.TrimSpace(*name)}, func() (err error) {
			k, key, err = st.CreateNamedAPIKey(ctx, t.ID, strings.TrimSpace(*name))
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "API key %s for tenant %s (%s) created\nAPI key (shown once, only its SHA-256 is stored): %s\n", k.ID, t.ID, t.Name, key)
		return nil
	default: // revoke
		var k store.APIKey
		err := audited(ctx, st, t.ID, api.AuditAPIKeyRevoke, "key_id="+fs.Arg(0), map[string]any{"force": *force}, func() (err error) {
			k, _, err = st.RevokeAPIKey(ctx, t.ID, fs.Arg(0), *force)
			return err
		})
		switch {
		case errors.Is(err, herald.ErrNotFound):
			return fmt.Errorf("tenant %s has no API key %s", t.ID, fs.Arg(0))
		case errors.Is(err, store.ErrLastActiveKey):
			return fmt.Errorf("%s is the last active API key of tenant %s: create another first, or pass --force", fs.Arg(0), t.ID)
		case err != nil:
			return err
		}
		fmt.Fprintf(stdout, "API key %s (%s) revoked at %s; running API processes refuse it within 30 s\n",
			k.ID, k.Prefix, k.RevokedAt.UTC().Format(time.RFC3339))
		return nil
	}
}

// findTenant finds a tenant by id or, failing that, by a name only one tenant has.
func findTenant(ctx context.Context, st *store.Store, idOrName string) (store.Tenant, error) {
	ts, err := st.ListTenants(ctx)
	if err != nil {
		return store.Tenant{}, err
	}
	var byName []store.Tenant
	for _, t := range ts {
		if t.ID == idOrName {
			return t, nil
		}
		if t.Name == idOrName {
			byName = append(byName, t)
		}
	}
	switch len(byName) {
	case 0:
		return store.Tenant{}, fmt.Errorf("no tenant %q (herald tenant list shows them)", idOrName)
	case 1:
		return byName[0], nil
	default:
		return store.Tenant{}, fmt.Errorf("%d tenants are named %q: pass the tenant id", len(byName), idOrName)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
