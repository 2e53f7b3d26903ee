package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/testenv"
)

// dupCount reads duplicates_suppressed, first_seen_at and last_seen_at of a
// notification (GET /v1/notifications/{id}).
func dupCount(t *testing.T, h *apitest.Harness, key, id string) (int, time.Time, time.Time) {
	t.Helper()
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil)
	n, ok := r.JSON["duplicates_suppressed"].(float64)
	if !ok {
		t.Fatalf("no duplicates_suppressed: %s", r.Body)
	}
	first, err1 := time.Parse(time.RFC3339Nano, r.Str("first_seen_at"))
	last, err2 := time.Parse(time.RFC3339Nano, r.Str("last_seen_at"))
	if err1 != nil || err2 != nil {
		t.Fatalf("first_seen_at / last_seen_at: %s", r.Body)
	}
	return int(n), first, last
}

// The same idempotency_key with another body is 422 idempotency_key_reused naming
// the field, for each part of the body; the identical body (keys, channels and
// send_at written differently) is a 200 duplicate; only duplicates are counted.
func TestIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("shop", e2eTemplates...)
	createUser(h, key, "ada")
	createUser(h, key, "bea")
	sendAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	body := func(mod func(map[string]any)) map[string]any {
		b := map[string]any{"user_id": "ada", "template_id": "order_shipped", "channels": []string{"in_app", "email"},
			"data":    map[string]any{"title": "Shipped", "order": map[string]any{"id": 1234, "items": []any{"a", "b"}}},
			"send_at": sendAt.Format(time.RFC3339), "idempotency_key": "order-1234"}
		if mod != nil {
			mod(b)
		}
		return b
	}
	first := h.Submit(key, body(nil))
	if first.Status != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	id := first.Str("notification_id")

	for name, mod := range map[string]func(map[string]any){
		"user":       func(b map[string]any) { b["user_id"] = "bea" },
		"template":   func(b map[string]any) { b["template_id"] = "hi" },
		"data value": func(b map[string]any) { b["data"].(map[string]any)["title"] = "Delayed" },
		"nested data": func(b map[string]any) {
			b["data"].(map[string]any)["order"] = map[string]any{"id": 1235, "items": []any{"a", "b"}}
		},
		"array order": func(b map[string]any) {
			b["data"].(map[string]any)["order"] = map[string]any{"id": 1234, "items": []any{"b", "a"}}
		},
		"number text": func(b map[string]any) {
			b["data"].(map[string]any)["order"] = map[string]any{"id": 1234.5, "items": []any{"a", "b"}}
		},
		"channels":     func(b map[string]any) { b["channels"] = []string{"in_app"} },
		"no channels":  func(b map[string]any) { delete(b, "channels") },
		"send_at":      func(b map[string]any) { b["send_at"] = sendAt.Add(time.Minute).Format(time.RFC3339) },
		"no send_at":   func(b map[string]any) { delete(b, "send_at") },
		"ordering_key": func(b map[string]any) { b["ordering_key"] = "orders" },
	} {
		r := h.Submit(key, body(mod))
		if r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("%s changed: want 422, got %d %s", name, r.Status, r.Body)
		}
		apitest.WantError(t, r, http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")
	}
	// The same key in the header with another body: the same answer.
	hdr := body(func(b map[string]any) { delete(b, "idempotency_key"); b["user_id"] = "bea" })
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/notifications", key, hdr, "Idempotency-Key", "order-1234"),
		http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")

	// The identical body, written differently: keys in another order, channels in
	// another order, send_at in another zone.
	same := `{"idempotency_key":"order-1234","send_at":"` + sendAt.In(time.FixedZone("X", 3600)).Format(time.RFC3339) + `",` +
		`"data":{"order":{"items":["a","b"],"id":1234},"title":"Shipped"},"channels":["email","in_app"],"template_id":"order_shipped","user_id":"ada"}`
	for range 2 {
		r := h.Submit(key, same)
		if r.Status != http.StatusOK || r.Str("dedup") != "duplicate" || r.Str("notification_id") != id {
			t.Fatalf("identical body: want 200 duplicate of %s, got %d %s", id, r.Status, r.Body)
		}
	}
	n, firstSeen, lastSeen := dupCount(t, h, key, id)
	if n != 2 {
		t.Fatalf("duplicates_suppressed = %d after 2 duplicates and 11 reused keys, want 2", n)
	}
	if !lastSeen.After(firstSeen) {
		t.Fatalf("last_seen_at %v not after first_seen_at %v", lastSeen, firstSeen)
	}

	// A content-derived key has no body to differ by: channels differ, still the
	// same notification (as before).
	c1 := h.Submit(key, map[string]any{"user_id": "bea", "template_id": "hi", "channels": []string{"in_app"}, "data": map[string]any{"x": 1}})
	c2 := h.Submit(key, map[string]any{"user_id": "bea", "template_id": "hi", "channels": []string{"email"}, "data": map[string]any{"x": 1}})
	if c1.Status != http.StatusAccepted || c2.Status != http.StatusOK || c2.Str("notification_id") != c1.Str("notification_id") {
		t.Fatalf("content-derived key: %d %s / %d %s", c1.Status, c1.Body, c2.Status, c2.Body)
	}
}

// 200 concurrent submissions of one new key while no worker runs (the original
// is only a Temporal start, never recorded by its workflow): one 202, 199
// duplicates, and the ledger counts exactly 199. Then a storm mixing two bodies:
// exactly one is accepted; its body's copies are duplicates, the other body's
// are 422, and only the duplicates are counted.
func TestDuplicateStormIsCountedExactly(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.TenantWith("social", e2eTemplates...)
	createUser(h, key, "bob")
	bodyOf := func(idem, liker string) map[string]any {
		return map[string]any{"user_id": "bob", "template_id": "like", "channels": []string{"in_app"},
			"data": map[string]any{"liker": liker}, "idempotency_key": idem}
	}

	const n = 200
	responses := make([]apitest.Response, n)
	concurrently(n, func(i int) { responses[i] = h.Submit(key, bodyOf("storm-1", "carol")) })
	var id string
	news, dups := 0, 0
	for _, r := range responses {
		switch {
		case r.Status == http.StatusAccepted:
			news++
			id = r.Str("notification_id")
		case r.Status == http.StatusOK && r.Str("dedup") == "duplicate":
			dups++
		default:
			t.Fatalf("unexpected %d %s", r.Status, r.Body)
		}
	}
	if news != 1 || dups != n-1 {
		t.Fatalf("%d new, %d duplicates", news, dups)
	}
	if got, _, _ := dupCount(t, h, key, id); got != n-1 {
		t.Fatalf("duplicates_suppressed = %d after %d concurrent submissions, want %d", got, n, n-1)
	}

	concurrently(n, func(i int) {
		liker := "carol"
		if i%2 == 1 {
			liker = "dave"
		}
		responses[i] = h.Submit(key, bodyOf("storm-2", liker))
	})
	var winner, mixedID string
	for i, r := range responses {
		if r.Status == http.StatusAccepted {
			if winner != "" {
				t.Fatalf("two bodies accepted for one key")
			}
			winner, mixedID = []string{"carol", "dave"}[i%2], r.Str("notification_id")
		}
	}
	if winner == "" {
		t.Fatal("nothing accepted")
	}
	for i, r := range responses {
		liker := []string{"carol", "dave"}[i%2]
		switch {
		case r.Status == http.StatusAccepted:
		case liker == winner && (r.Status != http.StatusOK || r.Str("notification_id") != mixedID):
			t.Fatalf("same body as the accepted one: %d %s", r.Status, r.Body)
		case liker != winner:
			apitest.WantError(t, r, http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")
		}
	}
	if got, _, _ := dupCount(t, h, key, mixedID); got != n/2-1 {
		t.Fatalf("duplicates_suppressed = %d, want %d (the accepted body's copies only)", got, n/2-1)
	}
}

// The API died between the workflow start and the ledger write: duplicates fall
// back to the body hash in the workflow's memo, still answer 422 for another body
// and count only the identical ones.
func TestKeyReuseDetectedFromTheMemo(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.TenantWith("saas", e2eTemplates...)
	createUser(h, key, "cy")
	body := map[string]any{"user_id": "cy", "template_id": "t", "channels": []string{"in_app"}, "data": map[string]any{"n": 1}, "idempotency_key": "memo-1"}
	id := h.Accept(key, body)
	pool := testenv.Pool(t)
	if _, err := dbx.WithNotificationIDs(pool).Exec(context.Background(), `DELETE FROM notification_dedup WHERE tenant_id = $1 AND notification_id = $2`, tenantID, id); err != nil {
		t.Fatal(err)
	}
	other := map[string]any{"user_id": "cy", "template_id": "t", "channels": []string{"in_app"}, "data": map[string]any{"n": 2}, "idempotency_key": "memo-1"}
	apitest.WantError(t, h.Submit(key, other), http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")
	for range 2 {
		if r := h.Submit(key, body); r.Status != http.StatusOK || r.Str("notification_id") != id {
			t.Fatalf("identical body: %d %s", r.Status, r.Body)
		}
	}
	apitest.WantError(t, h.Submit(key, other), http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")
	if got, _, _ := dupCount(t, h, key, id); got != 2 {
		t.Fatalf("duplicates_suppressed = %d, want 2", got)
	}
	// The key resolves to the notification although its workflow never recorded it.
	found := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications?dedup_key=memo-1", key, nil))
	if len(found) != 1 || found[0]["notification_id"] != id || found[0]["status"] != "queued" || found[0]["duplicates_suppressed"] != float64(2) {
		t.Fatalf("dedup_key=memo-1 while only a start: %v", found)
	}
}

// Once the original is recorded, the ledger answers duplicates and reused keys by
// itself (no Temporal call): shown by terminating the original's run in Temporal,
// after which a start alone would accept the key anew. Inside the window the
// ledger still answers with the original (counted) or 422; a window shorter than
// api.LedgerMargin is left to the start, which then accepts anew.
func TestLedgerAnswersInsideTheWindow(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("shop", e2eTemplates...)
	createUser(h, key, "ada")
	ctx := context.Background()
	body := func(idem string, n int, ttl int) map[string]any {
		b := map[string]any{"user_id": "ada", "template_id": "t", "channels": []string{"in_app"}, "data": map[string]any{"n": n}, "idempotency_key": idem}
		if ttl > 0 {
			b["dedup_ttl_sec"] = ttl
		}
		return b
	}
	terminate := func(id string) {
		t.Helper()
		r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil)
		if err := h.Temporal.TerminateWorkflow(ctx, r.Str("workflow_id"), r.Str("run_id"), "test: the run is gone"); err != nil {
			t.Fatal(err)
		}
	}

	id := h.Accept(key, body("ledger-1", 1, 0))
	waitDelivered(h, key, id)
	terminate(id)
	if r := h.Submit(key, body("ledger-1", 1, 0)); r.Status != http.StatusOK || r.Str("notification_id") != id || r.Str("status") != "delivered" {
		t.Fatalf("duplicate answered by the ledger: %d %s", r.Status, r.Body)
	}
	apitest.WantError(t, h.Submit(key, body("ledger-1", 2, 0)), http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")
	if got, _, _ := dupCount(t, h, key, id); got != 1 {
		t.Fatalf("duplicates_suppressed = %d, want 1", got)
	}

	short := h.Accept(key, body("ledger-2", 1, 4)) // a 4 s window: under the margin
	waitDelivered(h, key, short)
	terminate(short)
	if r := h.Submit(key, body("ledger-2", 1, 4)); r.Status != http.StatusAccepted || r.Str("notification_id") == short {
		t.Fatalf("a window under the margin is the start's to decide: %d %s", r.Status, r.Body)
	}
}
