package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/store"
)

// The live inbox, bounded like the accept path: streams, actions and bytes per tenant.

// openRawStreams opens n inbox streams (GET path with key) that read and
// discard what they are sent, cheaply (the harness's Stream buffers 10,000
// events each); they close when the test ends.
func openRawStreams(t *testing.T, h *apitest.Harness, paths []string, key string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 1}}
	errs := make(chan error, len(paths))
	for _, p := range paths {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("GET %s: %d", p, resp.StatusCode)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// usersNamed makes n users prefix-0 … prefix-(n-1) of the tenant in one statement.
func usersNamed(t *testing.T, h *apitest.Harness, tenantID, prefix string, n int) []string {
	t.Helper()
	names := make([]string, n)
	us := make([]store.User, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		us[i] = store.User{UserID: names[i]}
	}
	if err := h.Store.InsertUsers(context.Background(), tenantID, us); err != nil {
		t.Fatal(err)
	}
	return names
}

func inboxItemsFor(tenantID string, users []string, title string) []store.NewInboxItem {
	at := time.Now()
	items := make([]store.NewInboxItem, len(users))
	for i, u := range users {
		items[i] = store.NewInboxItem{TenantID: tenantID, UserID: u, NotificationID: ids.NotificationID(ids.IdempotencyKeyHash(freshKey(title)), "8d0f1e9a-5b7c-4c1d-9e2f-3a4b5c6d7e8f"),
			Title: title, Body: "b", CreatedAt: at}
	}
	return items
}

// TestCampaignInAppBatchWakesOnlyItsRecipients: 1,000 streams of two other
// tenants are open while a 500-recipient in-app batch (what a campaign batch
// writes, through the same insertInboxItems and NOTIFY) lands for a third
// tenant. Before: the batch did not fit one NOTIFY, fell back to "*", and every
// one of the 1,000 streams was woken and re-read its log. After: the batch's
// NOTIFYs name its recipients only, so no stream of another tenant is woken.
// The count is exact: the hub counts every wake-up it delivers when it
// dispatches a NOTIFY, and the sentinel's event (committed after the batch, so
// dispatched after it by the one listener) marks the end of the batch's.
func TestCampaignInAppBatchWakesOnlyItsRecipients(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true, InboxHeartbeat: time.Hour})
	ctx := context.Background()
	campaignTenant, _ := h.Tenant("campaign")
	// Recipient ids as long as ids may be (255 bytes): the batch needs several payloads.
	long := make([]byte, 240)
	for i := range long {
		long[i] = 'r'
	}
	recipients := usersNamed(t, h, campaignTenant, string(long), 500)

	var streams int
	var sentinelTenant, sentinelKey string
	for _, name := range []string{"bystander-b", "bystander-c"} {
		tenantID, key := h.Tenant(name)
		var paths []string
		for _, u := range usersNamed(t, h, tenantID, "u", 100) {
			for range 5 { // the per-user limit
				paths = append(paths, "/v1/users/"+u+"/inbox/stream")
			}
		}
		openRawStreams(t, h, paths, key)
		streams += len(paths)
		sentinelTenant, sentinelKey = tenantID, key
	}
	createUser(h, sentinelKey, "sentinel")
	sentinel := h.OpenStream("", "/v1/users/sentinel/inbox/stream", sentinelKey)
	sentinel.NextOf("ready", streamWithin)
	h.Eventually(streamWithin, "1,001 streams open", func() bool { return h.InboxStreamsOpen() == streams+1 })
	// A stream opened without an id reads nothing until a wake-up (ready
	// gave it the current id): the counters are at rest.
	reads := func() float64 { return h.Scrape().Value(metrics.InboxStreamReads) }
	wakeups := func() float64 { return h.Scrape().Value(metrics.InboxStreamWakeups) }
	w0, r0 := wakeups(), reads()

	if _, err := h.Store.InsertInboxItems(ctx, inboxItemsFor(campaignTenant, recipients, "campaign")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.InsertInboxItems(ctx, inboxItemsFor(sentinelTenant, []string{"sentinel"}, "after the batch")); err != nil {
		t.Fatal(err)
	}
	if ev := sentinel.NextOf(herald.InboxItemCreated, streamWithin); ev.Data["item"].(map[string]any)["title"] != "after the batch" {
		t.Fatalf("sentinel got %s", ev.Raw)
	}
	woken := wakeups() - w0
	// Each counted wake-up costs one read; wait for the woken streams to make them.
	h.Eventually(streamWithin, "the woken streams' reads", func() bool { return reads()-r0 >= woken })
	t.Logf("a 500-recipient in-app batch with %d streams of other tenants open: %.0f wake-ups, %.0f stream reads (the sentinel's included)",
		streams, woken, reads()-r0)
	if woken != 1 {
		t.Fatalf("the batch and the sentinel woke %.0f streams; want 1 (the sentinel's): a batch must wake only its recipients' streams", woken)
	}
}

// TestInboxSessionRevealsNoTenant: from an origin the tenant did not allow,
// an existing tenant's session answered 403 origin_not_allowed and a made-up
// tenant 401, so anyone could enumerate tenants. Every refusal before the
// hash is proven is now the same 401 invalid_user_hash (docs/inbox.md).
func TestInboxSessionRevealsNoTenant(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key, _ := inboxUser(t, h, "ada")
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/inbox/settings", key, map[string]any{"allowed_origins": []string{"https://app.example.com"}})
	secret := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/inbox/secret", key, nil).Str("secret")
	noSecretTenant, _ := h.Tenant("no-secret")
	session := func(tenant, hash, origin string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/inbox/session", "", map[string]any{"tenant_id": tenant, "user_id": "ada", "user_hash": hash}, "Origin", origin)
	}
	wrong := strings.Repeat("0", 64)
	for _, origin := range []string{"https://evil.example.net", "https://app.example.com"} {
		for name, tenant := range map[string]string{"existing": tenantID, "unknown": "t_0000000000000000", "without a secret": noSecretTenant} {
			r := session(tenant, wrong, origin)
			if field, code := r.ErrorField(); r.Status != http.StatusUnauthorized || code != "invalid_user_hash" || field != "user_hash" {
				t.Errorf("%s tenant from %s with a wrong hash: %d %s, want 401 invalid_user_hash", name, origin, r.Status, r.Body)
			}
			if r.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s tenant from %s: a refusal carries CORS headers", name, origin)
			}
		}
	}
	// With the right hash the tenant's origins apply.
	hash := api.UserHash([]byte(secret), "ada")
	apitest.WantError(t, session(tenantID, hash, "https://evil.example.net"), http.StatusForbidden, "origin_not_allowed", "Origin")
	if r := session(tenantID, hash, "https://app.example.com"); r.Status != http.StatusCreated {
		t.Fatalf("the right hash from an allowed origin: %d %s", r.Status, r.Body)
	}
}

// TestUserHashMintsNothingAfterRevocation: a user hash is permanent, so right
// after DELETE /v1/users/{id}/tokens it minted a fresh, valid token. Now it
// mints nothing until the secret is rotated; tokens minted before the
// revocation are refused; the API key can still mint one.
func TestUserHashMintsNothingAfterRevocation(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key, before := inboxUser(t, h, "ada")
	secret := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/inbox/secret", key, nil).Str("secret")
	hash := api.UserHash([]byte(secret), "ada")
	session := func() apitest.Response {
		return h.Do(http.MethodPost, "/v1/inbox/session", "", map[string]any{"tenant_id": tenantID, "user_id": "ada", "user_hash": hash})
	}
	fromHash := session().Str("token")
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/users/ada/tokens", key, nil)
	for _, tok := range []string{before, fromHash} {
		apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/inbox", tok, nil), http.StatusUnauthorized, "invalid_user_token", "Authorization")
	}
	apitest.WantError(t, session(), http.StatusUnauthorized, "user_tokens_revoked", "user_hash")
	// The backend's own mint still works, and so does the hash once the secret is rotated.
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", h.UserToken(key, "ada"), nil)
	secret = h.MustDo(http.StatusCreated, http.MethodPost, "/v1/inbox/secret", key, nil).Str("secret")
	hash = api.UserHash([]byte(secret), "ada")
	r := session()
	if r.Status != http.StatusCreated {
		t.Fatalf("the new secret's hash: %d %s", r.Status, r.Body)
	}
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", r.Str("token"), nil)
}

// TestUserTokenMintIsAudited: minting a user token with the API key (a
// credential to a user's inbox) left no trace; it is now in the audit log,
// without the token.
func TestUserTokenMintIsAudited(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key, token := inboxUser(t, h, "ada")
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/users/ada/token", key, map[string]any{"ttl_seconds": 120})
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=user_token.mint", key, nil)
	items, _ := r.JSON["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("user_token.mint entries = %d, want 2 (inboxUser's and this one): %s", len(items), r.Body)
	}
	if e := items[0].(map[string]any); e["target"] != "user_id=ada" || !strings.Contains(string(r.Body), `"ttl_seconds":120`) {
		t.Fatalf("entry: %s", r.Body)
	}
	if strings.Contains(string(r.Body), token) {
		t.Fatal("the audit log holds a token")
	}
}

// awaitEnd waits for the stream to end (its events channel closes), skipping
// heartbeats and events; false if it is still open after within.
func awaitEnd(st *apitest.Stream, within time.Duration) bool {
	deadline := time.After(within)
	for {
		select {
		case _, ok := <-st.Events:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestStreamEndsWhenItsAPIKeyIsRevoked: a stream opened with a tenant API key
// outlived the key's revocation by up to an hour (maxInboxStreamLife). It now
// re-checks the key at every heartbeat and ends at the first one after.
func TestStreamEndsWhenItsAPIKeyIsRevoked(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true, InboxHeartbeat: 200 * time.Millisecond})
	_, first, _ := inboxUser(t, h, "ada")
	created := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/api-keys", first, map[string]any{"name": "stream"})
	second, secondID := created.Str("key"), created.Str("id")
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", second)
	st.NextOf("ready", streamWithin)
	if awaitEnd(st, 700*time.Millisecond) {
		t.Fatal("the stream ended while its key was valid")
	}
	h.MustDo(http.StatusOK, http.MethodDelete, "/v1/api-keys/"+secondID, first, nil)
	if !awaitEnd(st, streamWithin) {
		t.Fatalf("the stream opened with a revoked key is still open %s after the revocation", streamWithin)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/inbox/stream", second, nil), http.StatusUnauthorized, "invalid_api_key", "Authorization")
}

// TestBadAPIKeysCostBoundedLookups: every request with a bad API key cost a
// PostgreSQL round trip, with no limit. Now a refused key is remembered (no
// lookup when repeated) and a source's lookups of keys that turn out bad are a
// token bucket (DefaultAuthFailures): past it, 429 with Retry-After and no
// lookup; a valid key already cached still works.
func TestBadAPIKeysCostBoundedLookups(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("bad-keys")
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates", key, nil) // cached from now on
	lookups := func() float64 { return h.Scrape().Value(metrics.AuthLookups, "outcome", metrics.AuthLookupNotFound) }
	l0, start := lookups(), time.Now()
	statuses := map[int]int{}
	const requests = 400
	for i := range requests {
		bad := "hk_" + strings.Repeat("0", 40) + fmt.Sprint(i%(requests/2)) // half repeat an earlier key
		r := h.Do(http.MethodGet, "/v1/templates", bad, nil)
		statuses[r.Status]++
		if r.Status == http.StatusTooManyRequests && r.Header.Get("Retry-After") == "" {
			t.Fatal("a 429 without Retry-After")
		}
	}
	elapsed := time.Since(start)
	got := lookups() - l0
	bound := float64(api.DefaultAuthFailures.Burst) + api.DefaultAuthFailures.PerSecond*elapsed.Seconds() + 1
	t.Logf("%d bad-key requests from one address in %s: %v, %.0f PostgreSQL lookups (bound %.0f)", requests, elapsed.Round(time.Millisecond), statuses, got, bound)
	if statuses[http.StatusTooManyRequests] == 0 || statuses[http.StatusUnauthorized]+statuses[http.StatusTooManyRequests] != requests {
		t.Fatalf("answers %v: want 401s then 429s", statuses)
	}
	if got < 1 || got > bound {
		t.Fatalf("%.0f lookups for %d bad keys; want 1 to %.0f", got, requests, bound)
	}
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates", key, nil)
}

// TestInboxActionsAreRateLimitedPerUser: a user token could toggle
// read/unread without limit, each toggle an event every stream of the user
// reads. Now each user's actions are a token bucket (DefaultInboxActions):
// past it, 429 rate_limited with Retry-After and nothing written; another user
// of the same tenant is not affected.
func TestInboxActionsAreRateLimitedPerUser(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key, token := inboxUser(t, h, "ada")
	createUser(h, key, "bob")
	id := sendInApp(t, h, key, "ada", "toggle me")
	h.AwaitChannel(key, id, herald.ChannelInApp, herald.DeliveryDelivered, "", streamWithin)
	_, seq0, err := h.Store.GetInboxCounts(context.Background(), tenantID, "ada")
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[int]int{}
	start := time.Now()
	const toggles = 200
	for i := range toggles {
		action := []string{"read", "unread"}[i%2]
		r := h.Do(http.MethodPost, "/v1/users/ada/inbox/"+id+"/"+action, token, nil)
		statuses[r.Status]++
		if r.Status == http.StatusTooManyRequests {
			if field, code := r.ErrorField(); code != "rate_limited" || field != "" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("429: %s %v", r.Body, r.Header)
			}
		}
	}
	elapsed := time.Since(start)
	_, seq1, err := h.Store.GetInboxCounts(context.Background(), tenantID, "ada")
	if err != nil {
		t.Fatal(err)
	}
	bound := float64(api.DefaultInboxActions.Burst) + api.DefaultInboxActions.PerSecond*elapsed.Seconds() + 1
	t.Logf("%d read/unread toggles in %s: %v, %d events appended (bound %.0f)", toggles, elapsed.Round(time.Millisecond), statuses, seq1-seq0, bound)
	if statuses[http.StatusTooManyRequests] == 0 || float64(seq1-seq0) > bound {
		t.Fatalf("%v and %d events for %d toggles; want 429s and at most %.0f events", statuses, seq1-seq0, toggles, bound)
	}
	// The limit is ada's: bob's (API-key) mark-all is not refused.
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/bob/inbox/read-all", key, nil)
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/inbox/read-all", key, nil), http.StatusTooManyRequests, "rate_limited", "")
}

// TestMetricsAreNotOpenOnTheAPIPort: GET /metrics on the API port answered
// anyone who could reach the API (traffic, tenants with
// HERALD_METRICS_TENANT_LABELS, lanes, dead letters). Now it is served there
// only to the metrics token; without one configured it is not served there at
// all (the process's own listener, HERALD_METRICS_ADDR, serves it).
func TestMetricsAreNotOpenOnTheAPIPort(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("metrics")
	apitest.WantError(t, h.Do(http.MethodGet, "/metrics", "", nil), http.StatusUnauthorized, "missing_api_key", "Authorization")
	apitest.WantError(t, h.Do(http.MethodGet, "/metrics", key, nil), http.StatusUnauthorized, "invalid_api_key", "Authorization")
	if r := h.Do(http.MethodGet, "/metrics", h.MetricsToken, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), metrics.HTTPRequests) {
		t.Fatalf("with the metrics token: %d %.200s", r.Status, r.Body)
	}
	// Without a token configured: not on the API port at all.
	srv := httptest.NewServer(h.HandlerWith(func(c *config.Config) { c.MetricsToken = "" }))
	t.Cleanup(srv.Close)
	apitest.WantError(t, h.DoAt(srv.URL, http.MethodGet, "/metrics", h.MetricsToken, nil), http.StatusNotFound, "not_found", "")
}

// lockedBuffer is a log sink the API, the worker and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWebhookURLSecretsAreNeverLogged: a webhook URL often carries a secret
// (a token in its query, a key in its path). A failed attempt's error quoted
// the whole URL (`Post "http://…/hook?token=…": dial tcp …`) into the worker's
// log, the activity's failure in Temporal and the attempt list; the audit log
// kept it too. Now every one of them has scheme and host only.
func TestWebhookURLSecretsAreNeverLogged(t *testing.T) {
	logs := &lockedBuffer{}
	h := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	_, key := h.TenantWith("hook-secrets", "order")
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})
	const pathSecret, querySecret = "pathsecret7f3a", "querysecret9c1e"
	// Port 1 on loopback (allowed by the harness's HERALD_EGRESS_ALLOW): nothing listens, the attempt fails.
	ep, _ := createEndpoint(t, h, key, map[string]any{"url": "http://127.0.0.1:1/hooks/" + pathSecret + "?token=" + querySecret,
		"events": []string{"delivery.delivered"}})
	h.Accept(key, map[string]any{"user_id": "ada", "template_id": "order", "channels": []string{"in_app"}, "idempotency_key": freshKey("hooksecret")})
	var attempts apitest.Response
	h.Eventually(streamWithin, "two failed attempts", func() bool {
		attempts = h.MustDo(http.StatusOK, http.MethodGet, "/v1/webhook-endpoints/"+ep+"/attempts", key, nil)
		items, _ := attempts.JSON["items"].([]any)
		return len(items) >= 2
	})
	if !strings.Contains(string(attempts.Body), "127.0.0.1:1") {
		t.Fatalf("the attempts do not name the host: %s", attempts.Body)
	}
	audit := h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=webhook_endpoint.create", key, nil)
	if !strings.Contains(logs.String(), "Activity error") {
		t.Fatalf("no activity error was logged; the test saw nothing:\n%.2000s", logs.String())
	}
	for where, text := range map[string]string{"the attempts": string(attempts.Body), "the audit log": string(audit.Body), "the logs": logs.String()} {
		for _, secret := range []string{pathSecret, querySecret} {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s hold the URL's secret %q: …%s…", where, secret, text[max(0, i-120):min(len(text), i+40)])
			}
		}
	}
}

// TestWebhookEndpointsOnlyOnWebPorts: a tenant could register
// https://<any public host>:22/ (or :6379, :25) and have Herald's workers
// knock on that service. Now a webhook URL must use 80 or 443 (or a port the
// operator adds with HERALD_WEBHOOK_PORTS), unless its destination is one the
// operator named in HERALD_EGRESS_ALLOW, the providers' allowlist.
func TestWebhookEndpointsOnlyOnWebPorts(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("hook-ports")
	for _, u := range []string{"https://93.184.216.34:22/x", "http://93.184.216.34:6379/", "https://93.184.216.34:8443/hook"} {
		r := h.Do(http.MethodPost, "/v1/webhook-endpoints", key, map[string]any{"url": u})
		apitest.WantError(t, r, http.StatusUnprocessableEntity, "invalid_url", "url")
		if !strings.Contains(string(r.Body), "port") {
			t.Errorf("%s: the refusal does not say why: %s", u, r.Body)
		}
	}
	for _, u := range []string{"https://93.184.216.34/x", "http://93.184.216.34:80/x", "https://93.184.216.34:443/x",
		"http://127.0.0.1:9/hook"} { // 127.0.0.1 is the harness's HERALD_EGRESS_ALLOW: any port
		createEndpoint(t, h, key, map[string]any{"url": u})
	}
	// The operator adds a port.
	srv := httptest.NewServer(h.HandlerWith(func(c *config.Config) { c.WebhookPorts = []uint16{8443} }))
	t.Cleanup(srv.Close)
	if r := h.DoAt(srv.URL, http.MethodPost, "/v1/webhook-endpoints", key, map[string]any{"url": "https://93.184.216.34:8443/hook"}); r.Status != http.StatusCreated {
		t.Fatalf("with HERALD_WEBHOOK_PORTS=8443: %d %s", r.Status, r.Body)
	}
}

// bigItems are n inbox items of about size bytes each for the user, written in
// one transaction (one wake-up for the whole burst).
func bigItems(t *testing.T, h *apitest.Harness, tenantID, userID string, n, size int) {
	t.Helper()
	items := inboxItemsFor(tenantID, slices.Repeat([]string{userID}, n), "big")
	for i := range items {
		items[i].Body = strings.Repeat("b", size)
	}
	if _, err := h.Store.InsertInboxItems(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

// TestSlowStreamIsDroppedWithARefetch: a stream read 100 events per query
// whatever their size (items up to 512 KiB each: up to ~50 MB held for a
// client that reads slowly). Now a page is at most PageBytes of items, and a
// live stream more than a page behind gets "refetch" (the id to go on from and
// the counts) and is closed; reconnecting from that id replays nothing. The
// component reloads its list on refetch and EventSource reconnects by itself.
func TestSlowStreamIsDroppedWithARefetch(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true, InboxHeartbeat: time.Hour,
		InboxStreams: inboxlive.Limits{PageBytes: 64 << 10}})
	tenantID, _, token := inboxUser(t, h, "ada")
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token)
	st.NextOf("ready", streamWithin)
	slow0 := h.InboxHub().SlowClients()

	bigItems(t, h, tenantID, "ada", 10, 20_000) // 200 KB behind: three pages of 64 KiB
	ev := st.Next(streamWithin)
	if total, _, _ := ev.Counts(); ev.Type != herald.InboxRefetch || ev.ID != 10 || total != 10 {
		t.Fatalf("after a 200 KB burst: %s %d %s; want refetch 10 with total 10", ev.Type, ev.ID, ev.Raw)
	}
	if !awaitEnd(st, streamWithin) {
		t.Fatal("the stream stayed open after its refetch")
	}
	if got := h.InboxHub().SlowClients() - slow0; got != 1 {
		t.Fatalf("slow clients counted: %d, want 1", got)
	}
	again := h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", "10")
	again.Quiet(500 * time.Millisecond)
	// A burst within a page is sent as events, live.
	bigItems(t, h, tenantID, "ada", 2, 20_000)
	for want := int64(11); want <= 12; want++ {
		if ev := again.Next(streamWithin); ev.Type != herald.InboxItemCreated || ev.ID != want {
			t.Fatalf("small burst: %s %d, want item.created %d", ev.Type, ev.ID, want)
		}
	}
}

// TestStreamsMemoryIsBoundedPerProcess: 40 streams resume at once, each 300 KB
// behind (the opening replay sends it all, a page at a time). The pages in
// flight never reserve more than MemoryBytes together (here four 64 KiB
// pages; before, each stream read its 100 events at once, 12 MB in all), and
// every stream still gets every event.
func TestStreamsMemoryIsBoundedPerProcess(t *testing.T) {
	const streams, perStream, size = 40, 15, 20_000
	limits := inboxlive.Limits{PageBytes: 64 << 10, MemoryBytes: 256 << 10}
	h := apitest.Start(t, apitest.Options{NoWorker: true, InboxHeartbeat: time.Hour, InboxStreams: limits})
	tenantID, key := h.Tenant("memory")
	users := usersNamed(t, h, tenantID, "m", streams)
	for _, u := range users {
		bigItems(t, h, tenantID, u, perStream, size)
	}
	var wg sync.WaitGroup
	got := make([]int, streams)
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, h.URL+"/v1/users/"+u+"/inbox/stream", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Last-Event-ID", "0")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 32<<10)
			var line []byte
			for got[i] < perStream {
				n, err := resp.Body.Read(buf)
				for _, b := range buf[:n] {
					if b != '\n' {
						if len(line) < 16 {
							line = append(line, b)
						}
						continue
					}
					if strings.HasPrefix(string(line), "event: item.cre") {
						got[i]++
					}
					line = line[:0]
				}
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, n := range got {
		if n != perStream {
			t.Fatalf("stream %d got %d events, want %d", i, n, perStream)
		}
	}
	peak := h.InboxHub().MemoryPeak()
	t.Logf("%d streams replaying %d KB each (%d KB in all): page reservations peaked at %d KB (bound %d KB)",
		streams, perStream*size/1000, streams*perStream*size/1000, peak>>10, limits.MemoryBytes>>10)
	if peak > int64(limits.MemoryBytes) || peak < int64(limits.PageBytes) {
		t.Fatalf("page reservations peaked at %d bytes; want one page to %d", peak, limits.MemoryBytes)
	}
}
