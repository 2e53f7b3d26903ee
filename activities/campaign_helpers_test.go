package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/testenv"
)

// personalizedTemplate prints plain variables only: its email is batchable
// with per-recipient substitutions (templates.NewEmailSkeleton).
func personalizedTemplate(id string) templates.Template {
	return templates.Template{ID: id, Category: "marketing",
		InApp: &templates.InAppContent{Title: "Hi {{.name}}", Body: "Your code is {{.code}}"},
		Email: &templates.EmailContent{Subject: "{{.name}}, your {{.offer}} offer", Text: "Hello {{.name}}, your code is {{.code}}.",
			HTML: "<p>Hello <b>{{.name}}</b>, your code is {{.code}}.</p>"},
		SMS:  &templates.SMSContent{Text: "{{.name}}: code {{.code}} ({{.offer}})"},
		Push: &templates.PushContent{Title: "Hi {{.name}}", Body: "Code {{.code}}"},
	}
}

// conditionalTemplate's email has a conditional: not batchable, each recipient
// is sent its own render.
func conditionalTemplate(id string) templates.Template {
	t := personalizedTemplate(id)
	t.Email = &templates.EmailContent{Subject: "{{if .vip}}VIP: {{end}}{{.name}}, your offer",
		Text: "Hello {{.name}}{{if .vip}}, our VIP{{end}}, your code is {{.code}}."}
	return t
}

// recipientName and recipientCode are the per-recipient data of user i.
func recipientName(i int) string { return fmt.Sprintf("Name%05d", i) }
func recipientCode(i int) string { return fmt.Sprintf("C-%05d-X", i*7919%100000) }

// personalizedAudience creates n users prefix00000 … with an email address, a
// phone number and one push token each (push tokens "tok-prefix00000"), and
// uploads them as a list whose every line carries the user's own data (name,
// code; every third one vip), returning the list id and the user ids.
func personalizedAudience(t testing.TB, h *apitest.Harness, tenantID, key, prefix string, n int) (string, []string) {
	t.Helper()
	users := make([]store.User, n)
	ids := make([]string, n)
	tokens := make([]string, n)
	var nd strings.Builder
	for i := range users {
		id := fmt.Sprintf("%s%05d", prefix, i)
		email, phone := id+"@example.com", fmt.Sprintf("+1415%07d", i)
		users[i], ids[i], tokens[i] = store.User{UserID: id, Email: &email, Phone: &phone}, id, "tok-"+id
		fmt.Fprintf(&nd, `{"user_id":%q,"data":{"name":%q,"code":%q,"vip":%t}}`+"\n", id, recipientName(i), recipientCode(i), i%3 == 0)
	}
	if err := h.Store.InsertUsers(context.Background(), tenantID, users); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Pool(t).Exec(context.Background(), `
		INSERT INTO push_tokens (tenant_id, user_id, token, platform)
		SELECT $1, u, tok, 'android' FROM unnest($2::text[], $3::text[]) AS x(u, tok)`, tenantID, ids, tokens); err != nil {
		t.Fatal(err)
	}
	r := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", key, nd.String(), "Content-Type", "application/x-ndjson")
	if int(r.JSON["members"].(float64)) != n {
		t.Fatalf("list upload: %s", r.Body)
	}
	return r.Str("list_id"), ids
}

// sandboxMessage is one message the sandbox recorded.
type sandboxMessage struct {
	notificationID, channel, recipient, subject, body string
	calls                                             int
}

// sandboxMessages reads every message the sandbox recorded for the tenant.
func sandboxMessages(t testing.TB, tenantID string) []sandboxMessage {
	t.Helper()
	rows, err := testenv.Pool(t).Query(context.Background(), `
		SELECT notification_id, channel, recipient, COALESCE(subject, ''), body, calls FROM sandbox_messages WHERE tenant_id = $1`, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sandboxMessage, error) {
		var m sandboxMessage
		err := r.Scan(&m.notificationID, &m.channel, &m.recipient, &m.subject, &m.body, &m.calls)
		return m, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// countingDB counts the statements run through it (and through the
// transactions it begins), by kind: sandbox (the sandbox provider's own
// recording, the provider call itself) or herald (everything else).
type countingDB struct {
	db dbx.DB
	mu sync.Mutex
	// byKind counts statements; byText the herald ones by their first words.
	byKind map[string]int
	byText map[string]int
	total  atomic.Int64
}

func newCountingDB(db dbx.DB) *countingDB {
	return &countingDB{db: db, byKind: map[string]int{}, byText: map[string]int{}}
}

func (c *countingDB) count(sql string) {
	c.total.Add(1)
	kind := "herald"
	if strings.Contains(sql, "INSERT INTO sandbox_messages") {
		kind = "sandbox"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKind[kind]++
	if kind == "herald" {
		c.byText[statementName(sql)]++
	}
}

// statementName is a statement's first words, enough to tell them apart.
func statementName(sql string) string {
	f := strings.Fields(sql)
	if len(f) > 6 {
		f = f[:6]
	}
	return strings.Join(f, " ")
}

func (c *countingDB) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.byKind
	c.byKind, c.byText = map[string]int{}, map[string]int{}
	return out
}

func (c *countingDB) texts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.byText {
		out[k] = v
	}
	return out
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.count(sql)
	return c.db.Exec(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.count(sql)
	return c.db.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.count(sql)
	return c.db.QueryRow(ctx, sql, args...)
}

func (c *countingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	c.count("BEGIN")
	tx, err := c.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, c: c}, nil
}

// countingTx counts the statements of a transaction countingDB began.
type countingTx struct {
	pgx.Tx
	c *countingDB
}

func (t *countingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.c.count(sql)
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *countingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t.c.count(sql)
	return t.Tx.Query(ctx, sql, args...)
}

func (t *countingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t.c.count(sql)
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *countingTx) Commit(ctx context.Context) error {
	t.c.count("COMMIT")
	return t.Tx.Commit(ctx)
}

// campaignSpec is the batch activities' spec of a recorded campaign (as the
// API starts its workflow with).
func campaignSpec(t testing.TB, cp store.Campaign) contract.CampaignSpec {
	t.Helper()
	return contract.CampaignSpec{TenantID: cp.TenantID, CampaignID: cp.ID, WorkflowID: cp.WorkflowID, TemplateID: cp.TemplateID,
		TemplateVersion: cp.TemplateVersion, Category: cp.Category, Channels: cp.Channels,
		AudienceKind: cp.AudienceKind, AudienceRef: cp.AudienceRef}
}
