package ids

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCanonicalJSONSortsKeysAtEveryDepth(t *testing.T) {
	a := map[string]any{"b": 1, "a": map[string]any{"z": []any{map[string]any{"y": 1, "x": 2}}, "c": "s"}}
	got, err := CanonicalJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":{"c":"s","z":[{"x":2,"y":1}]},"b":1}`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestContentKeyHashIgnoresKeyOrderButNotValues(t *testing.T) {
	var d1, d2, d3 map[string]any
	must(t, json.Unmarshal([]byte(`{"order":{"id":"1","n":2},"name":"A"}`), &d1))
	must(t, json.Unmarshal([]byte(`{"name":"A","order":{"n":2,"id":"1"}}`), &d2))
	must(t, json.Unmarshal([]byte(`{"name":"A","order":{"n":3,"id":"1"}}`), &d3))
	h1, _ := ContentKeyHash("u1", "t", d1)
	h2, _ := ContentKeyHash("u1", "t", d2)
	h3, _ := ContentKeyHash("u1", "t", d3)
	h4, _ := ContentKeyHash("u2", "t", d1)
	if h1 != h2 {
		t.Fatal("same content in another key order must hash equally")
	}
	if h1 == h3 || h1 == h4 {
		t.Fatal("different value or user must hash differently")
	}
	// The separator keeps ("ab","c") and ("a","bc") apart.
	x, _ := ContentKeyHash("ab", "c", nil)
	y, _ := ContentKeyHash("a", "bc", nil)
	if x == y {
		t.Fatal("field boundaries must matter")
	}
}

func TestNotificationIDRoundTrip(t *testing.T) {
	k := IdempotencyKeyHash("order-1")
	run := "0190f3a2-7b1c-7def-8a12-3456789abcde"
	id := NotificationID(k, run)
	if !strings.HasPrefix(id, "n_") || len(id) != 66 {
		t.Fatalf("unexpected id %q", id)
	}
	gotK, gotRun, err := ParseNotificationID(id)
	if err != nil || gotK != k || gotRun != run {
		t.Fatalf("round trip: %v %v %v", gotK, gotRun, err)
	}
	wk, err := KeyHashFromWorkflowID(NotificationWorkflowID("t1", k))
	if err != nil || wk != k {
		t.Fatalf("workflow id round trip: %v %v", wk, err)
	}
	for _, bad := range []string{"", "n_", "x_" + id[2:], id + "0", strings.ToUpper(id), id[:65] + "g"} {
		if _, _, err := ParseNotificationID(bad); err == nil {
			t.Errorf("ParseNotificationID(%q) accepted a malformed id", bad)
		}
	}
}

func TestIdempotencyKeyAndContentNeverCollideByConstruction(t *testing.T) {
	c, _ := ContentKeyHash("u", "t", nil)
	if IdempotencyKeyHash("u|t|null") == c {
		t.Fatal("domain separation failed")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRunIDTimeReadsAUUIDv7(t *testing.T) {
	// A run id the Temporal dev server (1.29) made at 2026-12-03T14:55:39.582Z.
	at, ok := RunIDTime("01a23c67-683e-77ec-a098-f51f4ac3e52a")
	if want := time.Date(2026, 12, 3, 14, 55, 39, 582_000_000, time.UTC); !ok || !at.Equal(want) {
		t.Fatalf("RunIDTime = %v, %v; want %v", at, ok, want)
	}
	// As ParseNotificationID gives it back from a notification id.
	_, run, err := ParseNotificationID(NotificationID(IdempotencyKeyHash("k"), "01a23c67-683e-77ec-a098-f51f4ac3e52a"))
	if at2, ok := RunIDTime(run); err != nil || !ok || !at2.Equal(at) {
		t.Fatalf("from a notification id: %v, %v, %v", at2, ok, err)
	}
	for _, other := range []string{
		"3f2b8c1e-9d4a-4b6e-8f1a-2c3d4e5f6a7b", // v4
		"01a23c67-683e-77ec-c098-f51f4ac3e52a", // v7's version, another variant
		"", "01a23c67683e77eca098f51f4ac3e52",
	} {
		if _, ok := RunIDTime(other); ok {
			t.Errorf("RunIDTime(%q) read a time", other)
		}
	}
}
