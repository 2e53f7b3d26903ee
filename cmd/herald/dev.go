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

	"go.temporal.io/sdk/client"

	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/schema"
	"github.com/herald-notify/herald/worker"
)

const demoTenant = "demo"

// runDev prepares a local stack (schema, search attributes, a demo tenant with a
// fresh key) and runs the API and the worker in one process.
func runDev(ctx context.Context, cfg config.Config, stdout io.Writer, logger *slog.Logger) error {
	if _, err := schema.Up(cfg.DatabaseURL); err != nil {
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
	tc, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	err = worker.EnsureSearchAttributes(ctx, tc, cfg.TemporalNamespace)
	tc.Close()
	if err != nil {
		return err
	}

	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	st := store.New(pool)
	t, err := st.TenantByName(ctx, demoTenant)
	var key string
	switch {
	case errors.Is(err, herald.ErrNotFound):
		t, key, err = st.CreateTenant(ctx, demoTenant)
	case err == nil:
		// Only key hashes are stored, so an earlier key cannot be shown again: mint one.
		key, err = st.CreateAPIKey(ctx, t.ID)
	}
	if err == nil {
		err = ensureDemoTemplate(ctx, st, t.ID)
	}
	pool.Close()
	if err != nil {
		return err
	}
	base := "http://" + strings.Replace(cfg.HTTPAddr, "0.0.0.0", "127.0.0.1", 1)
	fmt.Fprintf(stdout, `
Herald dev stack
  tenant:      %s (%s)
  API key:     %s
  API:         %s   (OpenAPI: %s/openapi.yaml)
  Temporal UI: http://127.0.0.1:8233/namespaces/%s/workflows

Try it:
  export HERALD_KEY=%s
  curl -s -X PUT %s/v1/users/ada -H "Authorization: Bearer $HERALD_KEY" -d '{"email":"ada@example.com","phone":"+14155550100","locale":"en-GB","timezone":"Europe/London"}'
  curl -s -X POST %s/v1/notifications -H "Authorization: Bearer $HERALD_KEY" -d '{"user_id":"ada","template_id":"welcome","data":{"name":"Ada"},"idempotency_key":"welcome-ada"}'
  curl -s %s/v1/users/ada/inbox -H "Authorization: Bearer $HERALD_KEY"
  curl -s %s/v1/sandbox/messages -H "Authorization: Bearer $HERALD_KEY"   # the email and SMS the sandbox provider "sent"
  curl -s %s/v1/templates/welcome -H "Authorization: Bearer $HERALD_KEY"  # the demo template

`, t.Name, t.ID, key, base, base, cfg.TemporalNamespace, key, base, base, base, base, base)
	return runServices(ctx, cfg, logger, true, true)
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
