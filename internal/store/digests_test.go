package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/store"
)

// TestCloseDigestClaimsEachEventOnce: a close claims the key's unclaimed
// events up to its seq (and never another key's), a retried close with the
// same digest id returns what the first claimed, the next close takes the
// rest, and an event claimed can no longer be cancelled out of its digest.
func TestCloseDigestClaimsEachEventOnce(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	at := time.Date(2026, 3, 7, 15, 0, 0, 0, time.UTC)
	var seqs []int64
	for i := 0; i < 5; i++ {
		seq, err := st.AddDigestEvent(ctx, store.DigestEvent{TenantID: tn.ID, DigestKey: "digest/a", NotificationID: "n_a" + string(rune('0'+i)),
			At: at.Add(time.Duration(i) * time.Second), Data: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	again, err := st.AddDigestEvent(ctx, store.DigestEvent{TenantID: tn.ID, DigestKey: "digest/a", NotificationID: "n_a0", At: at, Data: map[string]any{}})
	if err != nil || again != seqs[0] {
		t.Fatalf("adding an event again: seq %d, %v; want %d", again, err, seqs[0])
	}
	if _, err := st.AddDigestEvent(ctx, store.DigestEvent{TenantID: tn.ID, DigestKey: "digest/b", NotificationID: "n_b0", At: at, Data: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	closeAs := func(id string, maxSeq int64) store.ClosedDigest {
		t.Helper()
		d, err := st.CloseDigest(ctx, store.CloseDigestParams{TenantID: tn.ID, DigestKey: "digest/a", DigestID: id, FlowID: "f", UserID: "u",
			MaxSeq: maxSeq, Items: 2, ClosedAt: at.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := closeAs("dg_1", seqs[3])
	if first.Count != 4 || first.Remaining != 0 || len(first.Items) != 2 || !first.FirstAt.Equal(at) || !first.LastAt.Equal(at.Add(3*time.Second)) {
		t.Fatalf("first close: %+v", first)
	}
	if retry := closeAs("dg_1", seqs[4]); retry.Count != 4 {
		t.Fatalf("a retried close claimed more: %+v", retry)
	}
	if removed, digestID, err := st.RemoveDigestEvent(ctx, tn.ID, "n_a1"); err != nil || removed || digestID != "dg_1" {
		t.Fatalf("cancelling a claimed event: removed %v digest %q %v", removed, digestID, err)
	}
	if removed, _, err := st.RemoveDigestEvent(ctx, tn.ID, "n_a4"); err != nil || !removed {
		t.Fatalf("cancelling an open event: removed %v %v", removed, err)
	}
	if next := closeAs("dg_2", seqs[4]); next.Count != 0 {
		t.Fatalf("the cancelled event was claimed: %+v", next)
	}
	b, err := st.CloseDigest(ctx, store.CloseDigestParams{TenantID: tn.ID, DigestKey: "digest/b", DigestID: "dg_3", MaxSeq: seqs[4] + 100, ClosedAt: at})
	if err != nil || b.Count != 1 {
		t.Fatalf("the other key's close: %+v %v", b, err)
	}
}

// TestClaimThrottleAdmitsTheLimit: a bucket admits its limit and no more; a
// claim repeated for the same event and step returns its first answer.
func TestClaimThrottleAdmitsTheLimit(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	admitted := 0
	for i := 0; i < 7; i++ {
		ok, err := st.ClaimThrottle(ctx, tn.ID, "bucket", "n_"+string(rune('a'+i)), "0", 5)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d of 7, want 5", admitted)
	}
	if ok, err := st.ClaimThrottle(ctx, tn.ID, "bucket", "n_a", "0", 5); err != nil || !ok {
		t.Fatalf("a repeated admitted claim: %v %v", ok, err)
	}
	if ok, err := st.ClaimThrottle(ctx, tn.ID, "bucket", "n_g", "0", 5); err != nil || ok {
		t.Fatalf("a repeated refused claim: %v %v", ok, err)
	}
	if ok, err := st.ClaimThrottle(ctx, tn.ID, "other-bucket", "n_h", "0", 5); err != nil || !ok {
		t.Fatalf("another bucket: %v %v", ok, err)
	}
}

// TestOpenDigestsPagesAndCapsTheCount: a user's open digests come in keyset
// pages by (flow, key), with no digest twice or left out across pages, another
// user's never in them, and each count stopping at MaxCountedDigestEvents.
func TestOpenDigestsPagesAndCapsTheCount(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	at := time.Date(2026, 3, 7, 15, 0, 0, 0, time.UTC)
	open := func(user, flow, key string) string {
		t.Helper()
		dk := "digest/" + tn.ID + "/" + flow + "/" + user + "/" + key
		if err := st.OpenDigestWindow(ctx, store.DigestWindow{TenantID: tn.ID, DigestKey: dk, FlowID: flow, UserID: user, Key: key,
			OpenedAt: at, ClosesAt: at.Add(time.Hour), Window: time.Hour}); err != nil {
			t.Fatal(err)
		}
		return dk
	}
	var want []string
	for _, flow := range []string{"b", "a"} {
		for _, key := range []string{"k2", "", "k1"} {
			open("ada", flow, key)
			want = append(want, flow+"/"+key)
		}
	}
	open("bob", "a", "zz")
	full := open("ada", "c", "")
	want = append(want, "c/")
	if _, err := tx.Exec(ctx, `
		INSERT INTO digest_events (tenant_id, digest_key, notification_id, at, data)
		SELECT $1, $2, convert_to('n_' || i, 'UTF8'), $3, '{}' FROM generate_series(1, $4::int) i`, tn.ID, full, at, store.MaxCountedDigestEvents+5); err != nil {
		t.Fatal(err)
	}
	var got []string
	var after *store.OpenDigestsAfter
	pages := 0
	for {
		page, more, err := st.OpenDigests(ctx, tn.ID, "ada", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, d := range page {
			got = append(got, d.FlowID+"/"+d.Key)
			if d.FlowID == "c" && (d.Count != store.MaxCountedDigestEvents || !d.CountCapped) {
				t.Errorf("the full digest: count %d capped %v, want %d capped", d.Count, d.CountCapped, store.MaxCountedDigestEvents)
			}
			if d.FlowID != "c" && (d.Count != 0 || d.CountCapped) {
				t.Errorf("%s/%s: count %d capped %v, want 0", d.FlowID, d.Key, d.Count, d.CountCapped)
			}
		}
		if !more {
			break
		}
		last := page[len(page)-1]
		after = &store.OpenDigestsAfter{FlowID: last.FlowID, Key: last.Key}
	}
	sortedWant := []string{"a/", "a/k1", "a/k2", "b/", "b/k1", "b/k2", "c/"}
	if len(got) != len(want) || strings.Join(got, ",") != strings.Join(sortedWant, ",") || pages != 3 {
		t.Fatalf("pages %d: %v, want %v", pages, got, sortedWant)
	}
}

// TestDigestEventKeysTakeOverAndPrune: a digest-first event's key is its
// event's inside its window (a duplicate), taken over by the next event after
// it, and deleted by the prune once its window ended.
func TestDigestEventKeysTakeOverAndPrune(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	at := time.Date(2026, 3, 7, 15, 0, 0, 0, time.UTC)
	partitionsAt(t, tx, at) // a day of its own, long past: its partitions
	accept := func(id string, when time.Time) store.AcceptedDigestEvent {
		t.Helper()
		a, err := st.AcceptDigestEvent(ctx, store.AcceptDigestEventParams{TenantID: tn.ID, UserID: "u", FlowID: "f", FlowVersion: 1,
			KeyHash: "k1", NotificationID: id, WorkflowID: "notification/x/k1", RunID: id, DigestKey: "digest/k", StepPath: "0",
			Data: map[string]any{}, AcceptedAt: when, BodyHash: []byte{1}, DedupUntil: when.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := accept("n_1", at); a.Duplicate || a.NotificationID != "n_1" || a.Seq == 0 {
		t.Fatalf("first: %+v", a)
	}
	if a := accept("n_2", at.Add(30*time.Second)); !a.Duplicate || a.NotificationID != "n_1" {
		t.Fatalf("inside the window: %+v, want a duplicate of n_1", a)
	}
	if a := accept("n_3", at.Add(2*time.Minute)); a.Duplicate || a.NotificationID != "n_3" {
		t.Fatalf("after the window: %+v, want n_3 accepted", a)
	}
	var rows int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM digest_events WHERE tenant_id = $1`, tn.ID).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d event rows (%v), want 2", rows, err)
	}
	if n, err := st.PruneDigestEventKeys(ctx, at.Add(2*time.Minute), 10); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) while n_3's window is open", n, err)
	}
	if n, err := st.PruneDigestEventKeys(ctx, at.Add(4*time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v) after n_3's window, want 1", n, err)
	}
}
