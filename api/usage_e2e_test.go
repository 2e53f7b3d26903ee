package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

// TestUsage: GET /v1/usage counts the tenant's rows per table (exactly, at
// this size), gives bytes for the tables it has rows in and the oldest row
// kept, and counts nothing of another tenant's (B has more of everything).
func TestUsage(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, keyA := h.TenantWith("usage-a", "order")
	_, keyB := h.TenantWith("usage-b", "order")
	start := time.Now().Add(-time.Second)
	send := func(key string, users, each int) string {
		var last string
		for u := range users {
			id := fmt.Sprintf("u%d", u)
			h.PutUser(key, id, map[string]any{"email": id + "@example.com"})
			for i := range each {
				last = h.Accept(key, map[string]any{"user_id": id, "template_id": "order", "channels": []string{"in_app"},
					"idempotency_key": fmt.Sprintf("usage-%d-%d", u, i)})
			}
		}
		return last
	}
	lastA := send(keyA, 2, 3)
	lastB := send(keyB, 5, 4)
	h.AwaitChannel(keyA, lastA, herald.ChannelInApp, herald.DeliveryDelivered, "", 20*time.Second)
	h.AwaitChannel(keyB, lastB, herald.ChannelInApp, herald.DeliveryDelivered, "", 20*time.Second)
	h.Eventually(20*time.Second, "A's six inbox items", func() bool {
		n := 0
		for _, u := range []string{"u0", "u1"} {
			r := h.Do(http.MethodGet, "/v1/users/"+u+"/inbox", keyA, nil)
			items, _ := r.JSON["items"].([]any)
			n += len(items)
		}
		return n == 6
	})

	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/usage", keyA, nil)
	tables := map[string]map[string]any{}
	for _, x := range r.JSON["tables"].([]any) {
		m := x.(map[string]any)
		tables[m["table"].(string)] = m
	}
	t.Logf("usage of A: rows %v bytes %v; notifications %v", r.JSON["rows"], r.JSON["bytes"], tables["notifications"])
	for table, want := range map[string]float64{"users": 2, "notifications": 6, "deliveries": 6, "inbox": 6} {
		got := tables[table]
		if got == nil || got["rows"] != want || got["rows_exact"] != true {
			t.Errorf("%s: %v, want %v rows counted exactly (B's are not A's)", table, got, want)
			continue
		}
		if b, _ := got["bytes"].(float64); b <= 0 {
			t.Errorf("%s: bytes %v for %v rows", table, got["bytes"], want)
		}
		if _, ok := got["table_rows"]; ok {
			t.Errorf("%s: a tenant sees the whole table's rows (every tenant's): %v", table, got["table_rows"])
		}
		if _, ok := got["table_bytes"]; ok {
			t.Errorf("%s: a tenant sees the whole table's bytes (every tenant's): %v", table, got["table_bytes"])
		}
	}
	oldest, err := time.Parse(time.RFC3339Nano, fmt.Sprint(tables["notifications"]["oldest"]))
	if err != nil || oldest.Before(start) || oldest.After(time.Now()) {
		t.Errorf("oldest notification %v (%v), want within the test", tables["notifications"]["oldest"], err)
	}
	if tables["campaigns"]["rows"] != float64(0) || tables["campaigns"]["oldest"] != nil {
		t.Errorf("campaigns: %v, want none", tables["campaigns"])
	}
	if total, _ := r.JSON["rows"].(float64); total < 2+6+6+6 {
		t.Errorf("total rows %v", r.JSON["rows"])
	}
}
