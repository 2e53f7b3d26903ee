package apitest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/api"
)

// These tests need neither PostgreSQL nor Temporal: they prove that the checker the
// harness runs on every live response can both fail and pass.

// recordingTB captures what the checker reports instead of failing the test.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.errs = append(r.errs, "FATAL: "+fmt.Sprintf(format, args...))
}
func (r *recordingTB) Fatal(args ...any) { r.errs = append(r.errs, "FATAL: "+fmt.Sprint(args...)) }

const (
	testNotificationID = "n_5f2b8e0c1d9a4b7e8f3a6c2d1e0b9a8c0189f3a2b4c54d6e8f7a9b0c1d2e3f40"
	jsonCT             = "application/json; charset=utf-8"
)

type exchange struct {
	name   string
	method string
	path   string
	status int
	header map[string]string // response headers besides Content-Type
	ct     string            // response Content-Type; jsonCT when empty, "-" for none
	body   string
	// wantErr lists substrings the report must contain; empty means no report.
	wantErr []string
}

func (x exchange) run(t *testing.T) []string {
	t.Helper()
	req := httptest.NewRequest(x.method, "http://127.0.0.1:39999"+x.path, nil)
	h := http.Header{}
	switch x.ct {
	case "":
		h.Set("Content-Type", jsonCT)
	case "-":
	default:
		h.Set("Content-Type", x.ct)
	}
	for k, v := range x.header {
		h.Set(k, v)
	}
	resp := &http.Response{StatusCode: x.status, Header: h, Body: io.NopCloser(strings.NewReader(x.body)), Request: req}
	rec := &recordingTB{TB: t}
	checkAgainstOpenAPI(rec, req, resp, []byte(x.body))
	return rec.errs
}

func checkExchanges(t *testing.T, cases []exchange) {
	t.Helper()
	for _, x := range cases {
		t.Run(x.name, func(t *testing.T) {
			errs := x.run(t)
			if len(x.wantErr) == 0 {
				if len(errs) != 0 {
					t.Fatalf("want no OpenAPI report, got:\n%s", strings.Join(errs, "\n"))
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("want exactly one OpenAPI report, got %d:\n%s", len(errs), strings.Join(errs, "\n"))
			}
			for _, want := range append([]string{x.method, x.path, fmt.Sprint(x.status)}, x.wantErr...) {
				if !strings.Contains(errs[0], want) {
					t.Errorf("report lacks %q:\n%s", want, errs[0])
				}
			}
		})
	}
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPIDocument)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	if _, err := loadOpenAPI(); err != nil {
		t.Fatalf("checker cannot load the document: %v", err)
	}
}

// TestOpenAPIDocumentCoversEveryRoute compares the gin routes with the document's
// operations, both ways.
func TestOpenAPIDocumentCoversEveryRoute(t *testing.T) {
	engine, ok := api.New(nil, nil, api.Config{}, slog.New(slog.DiscardHandler)).Handler().(*gin.Engine)
	if !ok {
		t.Fatal("api.Server.Handler is no longer a *gin.Engine; update this test")
	}
	param := regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	var served []string
	for _, r := range engine.Routes() {
		served = append(served, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	sort.Strings(served)

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPIDocument)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(documented)
	if strings.Join(served, "\n") != strings.Join(documented, "\n") {
		t.Errorf("gin serves:\n  %s\nthe document describes:\n  %s",
			strings.Join(served, "\n  "), strings.Join(documented, "\n  "))
	}
}

func TestOpenAPICreateNotification(t *testing.T) {
	accepted := `{"notification_id":"` + testNotificationID + `","status":"queued","dedup":"new"}`
	duplicate := `{"notification_id":"` + testNotificationID + `","status":"delivered","dedup":"duplicate","original_accepted_at":"2026-05-01T10:00:00.123456Z"}`
	checkExchanges(t, []exchange{
		{name: "202 new", method: "POST", path: "/v1/notifications", status: 202, body: accepted},
		{name: "202 without dedup", method: "POST", path: "/v1/notifications", status: 202,
			body: `{"notification_id":"` + testNotificationID + `","status":"queued"}`, wantErr: []string{"dedup"}},
		{name: "202 with dedup duplicate", method: "POST", path: "/v1/notifications", status: 202,
			body: `{"notification_id":"` + testNotificationID + `","status":"queued","dedup":"duplicate"}`, wantErr: []string{"dedup"}},
		{name: "202 with a malformed id", method: "POST", path: "/v1/notifications", status: 202,
			body: `{"notification_id":"n_123","status":"queued","dedup":"new"}`, wantErr: []string{"notification_id"}},
		{name: "202 with an extra field", method: "POST", path: "/v1/notifications", status: 202,
			body: `{"notification_id":"` + testNotificationID + `","status":"queued","dedup":"new","run_id":"x"}`, wantErr: []string{"run_id"}},
		{name: "200 duplicate", method: "POST", path: "/v1/notifications", status: 200, body: duplicate},
		{name: "200 duplicate without original_accepted_at", method: "POST", path: "/v1/notifications", status: 200,
			body: `{"notification_id":"` + testNotificationID + `","status":"queued","dedup":"duplicate"}`, wantErr: []string{"original_accepted_at"}},
		{name: "200 duplicate with a bad timestamp", method: "POST", path: "/v1/notifications", status: 200,
			body: `{"notification_id":"` + testNotificationID + `","status":"queued","dedup":"duplicate","original_accepted_at":"yesterday"}`, wantErr: []string{"original_accepted_at"}},
		{name: "200 duplicate with an unknown status", method: "POST", path: "/v1/notifications", status: 200,
			body: strings.Replace(duplicate, `"delivered"`, `"done"`, 1), wantErr: []string{"status"}},
		{name: "undocumented status", method: "POST", path: "/v1/notifications", status: 201, body: accepted,
			wantErr: []string{"status is not supported"}},
		{name: "400 unknown channel", method: "POST", path: "/v1/notifications", status: 400,
			body: `{"error":{"code":"unknown_channel","message":"unknown channel \"fax\"","field":"channels[0]"}}`},
		{name: "400 with a code of another status", method: "POST", path: "/v1/notifications", status: 400,
			body: `{"error":{"code":"unknown_user","message":"x","field":"user_id"}}`, wantErr: []string{"code"}},
		{name: "400 without message", method: "POST", path: "/v1/notifications", status: 400,
			body: `{"error":{"code":"malformed_json"}}`, wantErr: []string{"message"}},
		{name: "400 not wrapped in error", method: "POST", path: "/v1/notifications", status: 400,
			body: `{"code":"malformed_json","message":"x"}`, wantErr: []string{"error"}},
		{name: "422 unknown user", method: "POST", path: "/v1/notifications", status: 422,
			body: `{"error":{"code":"unknown_user","message":"user u does not exist","field":"user_id"}}`},
		{name: "413", method: "POST", path: "/v1/notifications", status: 413,
			body: `{"error":{"code":"body_too_large","message":"request body exceeds 65536 bytes"}}`},
		{name: "503 with Retry-After", method: "POST", path: "/v1/notifications", status: 503, header: map[string]string{"Retry-After": "1"},
			body: `{"error":{"code":"temporarily_unavailable","message":"retry"}}`},
		{name: "503 without Retry-After", method: "POST", path: "/v1/notifications", status: 503,
			body: `{"error":{"code":"temporarily_unavailable","message":"retry"}}`, wantErr: []string{"Retry-After"}},
		{name: "401 with WWW-Authenticate", method: "POST", path: "/v1/notifications", status: 401,
			header: map[string]string{"WWW-Authenticate": `Bearer realm="herald", error="invalid_token"`},
			body:   `{"error":{"code":"invalid_api_key","message":"the API key is not valid","field":"Authorization"}}`},
		{name: "401 without WWW-Authenticate", method: "POST", path: "/v1/notifications", status: 401,
			body: `{"error":{"code":"missing_api_key","message":"send your key","field":"Authorization"}}`, wantErr: []string{"WWW-Authenticate"}},
		{name: "no Content-Type", method: "POST", path: "/v1/notifications", status: 202, ct: "-", body: accepted,
			wantErr: []string{"Content-Type"}},
		{name: "empty body", method: "POST", path: "/v1/notifications", status: 202, body: "",
			wantErr: []string{"(empty)"}},
	})
}

func TestOpenAPIGetNotification(t *testing.T) {
	path := "/v1/notifications/" + testNotificationID
	channel := `{"channel":"in_app","status":"delivered","provider":"inbox","provider_message_id":null,"attempts":1,` +
		`"last_error":null,"reason":null,"sent_at":null,"delivered_at":"2026-05-01T10:00:01Z","updated_at":"2026-05-01T10:00:01Z","history":[]}`
	view := func(channels string) string {
		return `{"notification_id":"` + testNotificationID + `","user_id":"u1","template_id":"welcome","status":"delivered","sequence":7,` +
			`"accepted_at":"2026-05-01T10:00:00Z","updated_at":"2026-05-01T10:00:01Z",` +
			`"workflow_id":"notification/t_0123456789abcdef/5f2b8e0c1d9a4b7e8f3a6c2d1e0b9a8c",` +
			`"run_id":"0189f3a2-b4c5-4d6e-8f7a-9b0c1d2e3f40","channels":[` + channels + `],` +
			`"dedup_key_hash":"5f2b8e0c1d9a4b7e8f3a6c2d1e0b9a8c","dedup_until":null,"duplicates_suppressed":3,` +
			`"first_seen_at":"2026-05-01T10:00:00Z","last_seen_at":"2026-05-01T10:05:00Z"}`
	}
	checkExchanges(t, []exchange{
		{name: "200", method: "GET", path: path, status: 200, body: view(channel)},
		{name: "200 fallback view", method: "GET", path: path, status: 200,
			body: strings.NewReplacer(`"u1"`, `""`, `"welcome"`, `""`, `"delivered"`, `"queued"`, `"sequence":7`, `"sequence":null`).Replace(view(""))},
		{name: "200 without sequence", method: "GET", path: path, status: 200,
			body: strings.Replace(view(""), `"sequence":7,`, ``, 1), wantErr: []string{"sequence"}},
		{name: "200 unknown channel status", method: "GET", path: path, status: 200,
			body: view(strings.Replace(channel, `"delivered"`, `"done"`, 1)), wantErr: []string{"status"}},
		{name: "200 channel without last_error", method: "GET", path: path, status: 200,
			body: view(strings.Replace(channel, `"last_error":null,`, ``, 1)), wantErr: []string{"last_error"}},
		{name: "200 without duplicates_suppressed", method: "GET", path: path, status: 200,
			body: strings.Replace(view(""), `"duplicates_suppressed":3,`, ``, 1), wantErr: []string{"duplicates_suppressed"}},
		{name: "200 channels null", method: "GET", path: path, status: 200,
			body: strings.Replace(view(""), `[]`, `null`, 1), wantErr: []string{"channels"}},
		{name: "404", method: "GET", path: path, status: 404, body: `{"error":{"code":"not_found","message":"notification not found"}}`},
		{name: "400", method: "GET", path: "/v1/notifications/nope", status: 400,
			body: `{"error":{"code":"invalid_field","message":"x","field":"notification_id"}}`},
		{name: "400 without field", method: "GET", path: "/v1/notifications/nope", status: 400,
			body: `{"error":{"code":"invalid_field","message":"x"}}`, wantErr: []string{"field"}},
		{name: "422 is undocumented here", method: "GET", path: path, status: 422,
			body: `{"error":{"code":"unknown_user","message":"x","field":"user_id"}}`, wantErr: []string{"status is not supported"}},
	})
}

func TestOpenAPIUsersAndInbox(t *testing.T) {
	user := `{"user_id":"u1","name":null,"email":"ada@example.com","phone":null,"locale":"en-US","timezone":null,` +
		`"created_at":"2026-05-01T10:00:00Z","updated_at":"2026-05-01T10:00:00Z"}`
	item := `{"notification_id":"` + testNotificationID + `","sequence":7,"title":"Hi","body":"Hello","action_url":null,"category":"",` +
		`"created_at":"2026-05-01T10:00:00Z","read_at":null,"seen_at":null,"archived_at":null}`
	counts := `"counts":{"total":1,"unread":1,"unseen":1}`
	itemWithCounts := strings.TrimSuffix(item, "}") + "," + counts + "}"
	read := "/v1/users/u1/inbox/" + testNotificationID + "/read"
	checkExchanges(t, []exchange{
		{name: "PUT 201", method: "PUT", path: "/v1/users/u1", status: 201, body: user},
		{name: "PUT 200", method: "PUT", path: "/v1/users/u1", status: 200, body: user},
		{name: "PUT 404 is undocumented", method: "PUT", path: "/v1/users/u1", status: 404,
			body: `{"error":{"code":"not_found","message":"user not found"}}`, wantErr: []string{"status is not supported"}},
		{name: "GET 201 is undocumented", method: "GET", path: "/v1/users/u1", status: 201, body: user, wantErr: []string{"status is not supported"}},
		{name: "GET user without name", method: "GET", path: "/v1/users/u1", status: 200,
			body: strings.Replace(user, `"name":null,`, ``, 1), wantErr: []string{"name"}},
		{name: "GET user with tenant_id", method: "GET", path: "/v1/users/u1", status: 200,
			body: strings.Replace(user, `{`, `{"tenant_id":"t_1",`, 1), wantErr: []string{"tenant_id"}},
		{name: "inbox last page", method: "GET", path: "/v1/users/u1/inbox?limit=5&unread=true", status: 200,
			body: `{"items":[` + item + `],"next_cursor":null,` + counts + `}`},
		{name: "inbox without counts", method: "GET", path: "/v1/users/u1/inbox", status: 200,
			body: `{"items":[` + item + `],"next_cursor":null}`, wantErr: []string{"counts"}},
		{name: "inbox with cursor", method: "GET", path: "/v1/users/u1/inbox", status: 200,
			body: `{"items":[` + item + `],"next_cursor":"MTc0NjA5MzYwMDAwMDAwMDpuXzE",` + counts + `}`},
		{name: "inbox without next_cursor", method: "GET", path: "/v1/users/u1/inbox", status: 200,
			body: `{"items":[]}`, wantErr: []string{"next_cursor"}},
		{name: "inbox items null", method: "GET", path: "/v1/users/u1/inbox", status: 200,
			body: `{"items":null,"next_cursor":null}`, wantErr: []string{"items"}},
		{name: "inbox 400 limit", method: "GET", path: "/v1/users/u1/inbox?limit=0", status: 400,
			body: `{"error":{"code":"invalid_field","message":"limit must be an integer from 1 to 100","field":"limit"}}`},
		{name: "inbox 400 naming another field", method: "GET", path: "/v1/users/u1/inbox", status: 400,
			body: `{"error":{"code":"invalid_field","message":"x","field":"offset"}}`, wantErr: []string{"field"}},
		{name: "read 200", method: "POST", path: read, status: 200,
			body: strings.Replace(itemWithCounts, `"read_at":null,"seen_at":null`, `"read_at":"2026-05-01T10:01:00Z","seen_at":"2026-05-01T10:01:00Z"`, 1)},
		{name: "read 200 with a bad read_at", method: "POST", path: read, status: 200,
			body: strings.Replace(itemWithCounts, `"read_at":null`, `"read_at":"now"`, 1), wantErr: []string{"read_at"}},
		{name: "read 404", method: "POST", path: read, status: 404, body: `{"error":{"code":"not_found","message":"inbox item not found"}}`},
	})
}

func TestOpenAPIOperationsAndRouting(t *testing.T) {
	notFound := `{"error":{"code":"not_found","message":"route not found"}}`
	notAllowed := `{"error":{"code":"method_not_allowed","message":"DELETE is not allowed here"}}`
	checkExchanges(t, []exchange{
		{name: "healthz", method: "GET", path: "/healthz", status: 200, body: `{"status":"ok"}`},
		{name: "readyz 200", method: "GET", path: "/readyz", status: 200, body: `{"status":"ready","checks":{"postgres":"ok","temporal":"ok"}}`},
		{name: "readyz 503", method: "GET", path: "/readyz", status: 503, body: `{"status":"not_ready","checks":{"postgres":"ok","temporal":"unreachable"}}`},
		{name: "readyz 200 claiming not_ready", method: "GET", path: "/readyz", status: 200,
			body: `{"status":"not_ready","checks":{"postgres":"ok","temporal":"unreachable"}}`, wantErr: []string{"status"}},
		{name: "openapi.yaml", method: "GET", path: "/openapi.yaml", status: 200, ct: "application/yaml", body: string(api.OpenAPIDocument)},
		{name: "undocumented route answering 200", method: "GET", path: "/v1/tenants", status: 200, body: `{"items":[]}`,
			wantErr: []string{"not in the document"}},
		{name: "undocumented route answering 404", method: "GET", path: "/v1/tenants", status: 404, body: notFound},
		{name: "undocumented route answering 404 with a bad body", method: "GET", path: "/nope", status: 404, ct: "text/plain", body: "404 page not found",
			wantErr: []string{"Content-Type"}},
		{name: "undocumented method answering 405", method: "DELETE", path: "/v1/users/u1/preferences", status: 405,
			header: map[string]string{"Allow": "PUT, GET"}, body: notAllowed},
		{name: "405 without Allow", method: "DELETE", path: "/v1/users/u1/preferences", status: 405, body: notAllowed, wantErr: []string{"Allow"}},
		{name: "undocumented method answering 200", method: "DELETE", path: "/v1/users/u1/preferences", status: 200, body: `{}`,
			wantErr: []string{"not with method DELETE"}},
	})
}

func TestOpenAPIReportTruncatesBody(t *testing.T) {
	x := exchange{method: "GET", path: "/healthz", status: 200, body: `{"status":"` + strings.Repeat("x", 2000) + `"}`}
	errs := x.run(t)
	if len(errs) != 1 {
		t.Fatalf("want one report, got %d: %v", len(errs), errs)
	}
	if strings.Contains(errs[0], strings.Repeat("x", 600)) || !strings.Contains(errs[0], "2013 bytes in all") {
		t.Errorf("body not truncated to 500 bytes:\n%.1500s", errs[0])
	}
}

// TestOpenAPILiveHandlerWithoutServices runs the real handler for the answers that
// need neither PostgreSQL nor Temporal, and checks them like the harness does.
func TestOpenAPILiveHandlerWithoutServices(t *testing.T) {
	srv := httptest.NewServer(api.New(nil, nil, api.Config{}, slog.New(slog.DiscardHandler)).Handler())
	defer srv.Close()
	cases := []struct {
		method, path, auth string
		status             int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/openapi.yaml", "", 200},
		{"POST", "/v1/notifications", "", 401},
		{"GET", "/v1/users/u1", "Bearer ", 401},
		{"GET", "/v1/users/u1/inbox", "Basic abc", 401},
		{"POST", "/v1/users/u1/inbox/" + testNotificationID + "/read", "", 401},
		{"GET", "/v1/notifications/" + testNotificationID, "", 401},
		{"PUT", "/v1/users/u1", "", 401},
		{"DELETE", "/v1/notifications/" + testNotificationID, "", 401},
		{"PUT", "/v1/notifications/" + testNotificationID, "", 405},
		{"GET", "/v1/dead-letters", "", 401},
		{"POST", "/v1/dead-letters/redrive", "", 401},
		{"POST", "/v1/dead-letters/7/redrive", "", 401},
		{"GET", "/v1/dead-letters/redrive", "", 405},
		{"GET", "/v1/notifications", "", 401},
		{"PATCH", "/v1/notifications", "", 405},
		{"POST", "/healthz", "", 405},
		{"GET", "/v1/tenants", "", 404},
		{"GET", "/", "", 404},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), c.method, srv.URL+c.path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, c.status, body)
			}
			checkAgainstOpenAPI(t, req, resp, body)
		})
	}
}
