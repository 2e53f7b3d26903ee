package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

const demoTenant = "demo"

// runDev prepares a local stack (schema, search attributes, a demo tenant and its
// dev API key) and runs the API and the worker in one process.
func runDev(ctx context.Context, cfg config.Config, stdout io.Writer, logger *slog.Logger) error {
	// What `herald migrate` does, Temporal included: the schema, then the
	// search attributes on the namespace.
	if err := migrateSchema(cfg, stdout); err != nil {
		return err
	}
	if err := registerSearchAttributes(ctx, cfg, stdout, logger, 0); err != nil {
		return err
	}
	if err := prepareNamespace(ctx, cfg, stdout, logger); err != nil {
		return err
	}
	if err := ensureDevSecretsKey(); err != nil {
		return err
	}
	// The dev stack shows what the sandbox provider "sent", and a channel without
	// a configured provider goes to the sandbox (unless HERALD_SANDBOX_FALLBACK
	// says otherwise).
	cfg.SandboxAPI = true
	if os.Getenv(config.EnvSandboxFallback) == "" {
		cfg.SandboxFallback = true
	}
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	st := store.New(pool)
	t, key, keyNote, err := ensureDevKey(ctx, st)
	if err == nil {
		err = ensureDemoTemplate(ctx, st, t.ID)
	}
	if err == nil {
		err = ensureDemoUser(ctx, st, t.ID)
	}
	pool.Close()
	if err != nil {
		return err
	}
	base := "http://" + strings.Replace(cfg.HTTPAddr, "0.0.0.0", "127.0.0.1", 1)
	demo, err := inboxDemoURL(base, t.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `
Herald dev stack
  tenant:      %s (%s)
  API key:     %s   (%s)
  API:         %s   (OpenAPI: %s/openapi.yaml)
  Temporal UI: http://127.0.0.1:8233/namespaces/%s/workflows
  Inbox demo:  %s
               (<herald-inbox> for user ada, live; the link's token is valid for 24 hours)

Try it:
  export HERALD_KEY=%s
  curl -s -X PUT %s/v1/users/ada -H "Authorization: Bearer $HERALD_KEY" -d '{"email":"ada@example.com","phone":"+14155550100","locale":"en-GB","timezone":"Europe/London"}'
  curl -s -X POST %s/v1/notifications -H "Authorization: Bearer $HERALD_KEY" -d '{"user_id":"ada","template_id":"welcome","data":{"name":"Ada"},"idempotency_key":"welcome-ada"}'
  curl -s %s/v1/users/ada/inbox -H "Authorization: Bearer $HERALD_KEY"
  curl -s %s/v1/sandbox/messages -H "Authorization: Bearer $HERALD_KEY"   # the email and SMS the sandbox provider "sent"
  curl -s %s/v1/templates/welcome -H "Authorization: Bearer $HERALD_KEY"  # the demo template

`, t.Name, t.ID, key, keyNote, base, base, cfg.TemporalNamespace, demo, key, base, base, base, base, base)
	return runServices(ctx, cfg, logger, true, true)
}

// demoUser is the user the demo page shows the inbox of.
const demoUser = "ada"

// ensureDemoUser creates ada (without addresses) unless she exists, so the
// inbox demo works before the first curl.
func ensureDemoUser(ctx context.Context, st *store.Store, tenantID string) error {
	ok, err := st.UserExists(ctx, tenantID, demoUser)
	if err != nil || ok {
		return err
	}
	_, _, err = st.UpsertUser(ctx, store.User{TenantID: tenantID, UserID: demoUser})
	return err
}

// inboxDemoURL is the demo page with a fresh 24-hour user token for ada in its
// fragment (which the browser never sends to a server).
func inboxDemoURL(base, tenantID string) (string, error) {
	tok, _, err := api.MintUserToken(app.UserTokenKey(os.Getenv(secrets.EnvKey)), tenantID, demoUser, time.Now(), api.MaxUserTokenTTL)
	if err != nil {
		return "", err
	}
	return base + api.InboxDemoPath + "#user=" + demoUser + "&token=" + tok, nil
}

// devSecretsKeyFile keeps the dev stack's provider-secrets key across restarts
// (git-ignored), so credentials stored with PUT /v1/providers stay readable.
const devSecretsKeyFile = ".herald/secrets.key"

// ensureDevSecretsKey sets HERALD_SECRETS_KEY for a dev stack that has none,
// creating the key file on first use. Production sets the variable itself.
func ensureDevSecretsKey() error {
	if os.Getenv(secrets.EnvKey) != "" {
		return nil
	}
	raw, err := os.ReadFile(devSecretsKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		key, gerr := secrets.GenerateKey()
		if gerr != nil {
			return gerr
		}
		if err := os.MkdirAll(filepath.Dir(devSecretsKeyFile), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(devSecretsKeyFile, []byte(key+"\n"), 0o600); err != nil {
			return err
		}
		raw = []byte(key)
	} else if err != nil {
		return err
	}
	return os.Setenv(secrets.EnvKey, strings.TrimSpace(string(raw)))
}

// devKeyFile keeps the demo tenant's API key across restarts (git-ignored, mode
// 0600): only key hashes are stored, so without it every start would have to mint
// a new key and leave the previous ones active.
const devKeyFile = ".herald/dev-api-key"

// devKeyName labels the keys herald dev mints (herald key list shows it).
const devKeyName = "herald dev"

// ensureDevKey returns the demo tenant (created if missing) and its dev API key:
// the one in devKeyFile while it is an active key of that tenant, else a new one,
// saved there. note says which, for the banner.
func ensureDevKey(ctx context.Context, st *store.Store) (t store.Tenant, key, note string, err error) {
	t, err = st.TenantByName(ctx, demoTenant)
	if errors.Is(err, herald.ErrNotFound) {
		if t, key, err = st.CreateTenant(ctx, demoTenant); err != nil {
			return t, "", "", err
		}
		return t, key, "new; saved in " + devKeyFile, writeDevKey(key)
	}
	if err != nil {
		return t, "", "", err
	}
	why := "new; saved in " + devKeyFile
	if raw, rerr := os.ReadFile(devKeyFile); rerr == nil {
		key = strings.TrimSpace(string(raw))
		owner, kerr := st.TenantByAPIKey(ctx, key)
		switch {
		case kerr == nil && owner.ID == t.ID:
			// Keep the file private even if something loosened it.
			if err := os.Chmod(devKeyFile, 0o600); err != nil {
				return t, "", "", err
			}
			return t, key, "reused from " + devKeyFile + "; revoke it with herald key revoke", nil
		case kerr == nil || errors.Is(kerr, herald.ErrNotFound):
			why = "new: the key in " + devKeyFile + " was revoked or is not the demo tenant's"
		default:
			return t, "", "", kerr
		}
	} else if !errors.Is(rerr, os.ErrNotExist) {
		return t, "", "", rerr
	}
	if _, key, err = st.CreateNamedAPIKey(ctx, t.ID, devKeyName); err != nil {
		return t, "", "", err
	}
	return t, key, why, writeDevKey(key)
}

// writeDevKey replaces devKeyFile with key, readable by this user only.
func writeDevKey(key string) error {
	dir := filepath.Dir(devKeyFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".dev-api-key-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // a no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), devKeyFile)
}

// ensureDemoTemplate gives the demo tenant a "welcome" template on every channel.
func ensureDemoTemplate(ctx context.Context, st *store.Store, tenantID string) error {
	if _, err := st.GetTemplate(ctx, tenantID, "welcome", 0); !errors.Is(err, herald.ErrNotFound) {
		return err
	}
	_, err := st.PutTemplate(ctx, tenantID, templates.Template{
		ID: "welcome", Category: "onboarding",
		InApp: &templates.InAppContent{Title: "Welcome, {{.name}}", Body: "Your Herald inbox works."},
		Email: &templates.EmailContent{Subject: "Welcome, {{.name}}", Text: "Hello {{.name}}, welcome aboard.",
			HTML: "<p>Hello <b>{{.name}}</b>, welcome aboard.</p>"},
		SMS:  &templates.SMSContent{Text: "Welcome to Herald, {{.name}}!"},
		Push: &templates.PushContent{Title: "Welcome", Body: "Hello {{.name}}"},
		Locales: map[string]templates.Variant{
			"de": {InApp: &templates.InAppContent{Title: "Willkommen, {{.name}}", Body: "Dein Herald-Posteingang funktioniert."}},
		},
	})
	return err
}
