package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
)

// v7 is a UUIDv7 run id made at at (as Temporal makes them).
func v7(at time.Time, rnd string) string {
	h := []byte("000000000000" + "7" + rnd[:3] + "8" + rnd[3:18])
	copy(h[:12], []byte(leftPad(at.UnixMilli())))
	s := string(h)
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

func leftPad(ms int64) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 12)
	for i := 11; i >= 0; i-- {
		out[i] = digits[ms&15]
		ms >>= 4
	}
	return string(out)
}

// GetNotification bounds its lookup to the time in the id's UUIDv7 run id,
// and still finds a notification whose accepted_at is far from it, or whose
// id holds no UUIDv7 (a campaign recipient's), in any partition; the
// deliveries come from the notification's own accepted_at, the attempts from
// a day before it on.
func TestGetNotificationBoundByTheRunIDsTime(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	cases := []struct {
		name       string
		id         string
		acceptedAt time.Time
	}{
		{"its run id's time", ids.NotificationID(ids.IdempotencyKeyHash("a"), v7(now.Add(-time.Hour), "0123456789abcdef01")), now.Add(-time.Hour)},
		{"far from its run id's time", ids.NotificationID(ids.IdempotencyKeyHash("b"), v7(now, "0123456789abcdef02")), now.Add(-3 * 24 * time.Hour)},
		{"a campaign recipient's", ids.CampaignNotificationID(tn.ID, "cmp_x", "u1"), now.Add(-2 * 24 * time.Hour)},
	}
	for _, c := range cases {
		if err := st.InsertNotification(ctx, store.Notification{TenantID: tn.ID, ID: c.id, UserID: "u1", TemplateID: "t",
			Channels: []herald.Channel{herald.ChannelInApp, herald.ChannelEmail}, WorkflowID: "notification/" + tn.ID + "/x",
			Status: herald.NotificationQueued, AcceptedAt: c.acceptedAt}); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, at)
			VALUES ($1, $2, 'email', 1, 'sandbox', 'accepted', $3)`, tn.ID, c.id, c.acceptedAt.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		n, err := st.GetNotification(ctx, tn.ID, c.id)
		if err != nil || n.ID != c.id || !n.AcceptedAt.Equal(c.acceptedAt) || len(n.Deliveries) != 2 {
			t.Errorf("%s: GetNotification = %s at %v with %d deliveries, %v", c.name, n.ID, n.AcceptedAt, len(n.Deliveries), err)
		}
		hist, err := st.ListAttemptsOf(ctx, tn.ID, c.id, c.acceptedAt)
		if err != nil || len(hist[herald.ChannelEmail]) != 1 {
			t.Errorf("%s: ListAttemptsOf = %v, %v", c.name, hist, err)
		}
	}
	// The worker's reads and writes by id find the rows wherever they are.
	for _, c := range cases {
		if _, err := st.GetDelivery(ctx, tn.ID, c.id, herald.ChannelEmail); err != nil {
			t.Errorf("%s: GetDelivery: %v", c.name, err)
		}
		applied, err := st.UpdateDelivery(ctx, tn.ID, c.id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent})
		if err != nil || !applied {
			t.Errorf("%s: UpdateDelivery applied %v, %v", c.name, applied, err)
		}
		if applied, err = st.UpdateDelivery(ctx, tn.ID, c.id, herald.ChannelInApp, store.DeliveryUpdate{Status: herald.DeliveryDelivered}); err != nil || !applied {
			t.Errorf("%s: UpdateDelivery in-app applied %v, %v", c.name, applied, err)
		}
		if err := st.SetNotificationStatus(ctx, tn.ID, c.id, herald.NotificationSending); err != nil {
			t.Errorf("%s: SetNotificationStatus: %v", c.name, err)
		}
		if status, at, err := st.NotificationStatus(ctx, tn.ID, c.id); err != nil || status != herald.NotificationSending || !at.Equal(c.acceptedAt) {
			t.Errorf("%s: NotificationStatus = %s at %v, %v", c.name, status, at, err)
		}
		status, err := st.RecomputeNotificationStatus(ctx, tn.ID, c.id)
		if want := herald.OverallStatus([]herald.DeliveryStatus{herald.DeliveryDelivered, herald.DeliverySent}); err != nil || status != want {
			t.Errorf("%s: RecomputeNotificationStatus = %s, %v; want %s", c.name, status, err, want)
		}
		if n, err := st.GetNotification(ctx, tn.ID, c.id); err != nil || n.Status != status {
			t.Errorf("%s: after the recompute the notification is %s, %v; want %s", c.name, n.Status, err, status)
		}
	}
	// Not there: not found, with or without a UUIDv7.
	for _, id := range []string{ids.NotificationID(ids.IdempotencyKeyHash("c"), v7(now, "0123456789abcdef03")), ids.CampaignNotificationID(tn.ID, "cmp_x", "u2")} {
		if _, err := st.GetNotification(ctx, tn.ID, id); !errors.Is(err, herald.ErrNotFound) {
			t.Errorf("GetNotification(%s) = %v, want not found", id, err)
		}
		if err := st.SetNotificationStatus(ctx, tn.ID, id, herald.NotificationSending); !errors.Is(err, herald.ErrNotFound) {
			t.Errorf("SetNotificationStatus(%s) = %v, want not found", id, err)
		}
		if _, err := st.GetDelivery(ctx, tn.ID, id, herald.ChannelEmail); !errors.Is(err, herald.ErrNotFound) {
			t.Errorf("GetDelivery(%s) = %v, want not found", id, err)
		}
		if applied, err := st.UpdateDelivery(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent}); err != nil || applied {
			t.Errorf("UpdateDelivery(%s) applied %v, %v; want nothing applied", id, applied, err)
		}
	}
}

// The statements by id read and write only the window of the id's run id
// when the row is there: a second row of the same id far from it (which no
// writer makes; the key allows it, as it holds accepted_at) is neither read
// nor changed, not even by an update the near row refuses. Every statement
// bounded by acceptedWindows is here: without its bound each would read or
// write the far row (the older partition comes first).
func TestStatementsByIDStayInTheRunIDsWindow(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := ids.NotificationID(ids.IdempotencyKeyHash("w"), v7(now, "0123456789abcdef04"))
	for _, at := range []time.Time{now, now.Add(-3 * 24 * time.Hour)} {
		if err := st.InsertNotification(ctx, store.Notification{TenantID: tn.ID, ID: id, UserID: "u1", TemplateID: "t",
			Channels: []herald.Channel{herald.ChannelEmail}, WorkflowID: "notification/" + tn.ID + "/x",
			Status: herald.NotificationQueued, AcceptedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if applied, err := st.UpdateDelivery(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent}); err != nil || !applied {
		t.Fatalf("UpdateDelivery applied %v, %v", applied, err)
	}
	if err := st.SetNotificationStatus(ctx, tn.ID, id, herald.NotificationSending); err != nil {
		t.Fatal(err)
	}
	if d, err := st.GetDelivery(ctx, tn.ID, id, herald.ChannelEmail); err != nil || d.Status != herald.DeliverySent {
		t.Fatalf("GetDelivery = %s, %v; want the near row's sent", d.Status, err)
	}
	if status, at, err := st.NotificationStatus(ctx, tn.ID, id); err != nil || !at.Equal(now) || status != herald.NotificationSending {
		t.Fatalf("NotificationStatus = %s at %v, %v; want the near row", status, at, err)
	}
	// An update the near row refuses (a "sent" after "delivered") is refused: not tried again on every partition,
	// where the far row would take it.
	if applied, err := st.UpdateDelivery(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliveryDelivered}); err != nil || !applied {
		t.Fatalf("UpdateDelivery delivered applied %v, %v", applied, err)
	}
	if applied, err := st.UpdateDelivery(ctx, tn.ID, id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliverySent}); err != nil || applied {
		t.Fatalf("UpdateDelivery sent after delivered applied %v, %v; want it refused", applied, err)
	}
	// The recompute locks, reads and writes the near row (the far row's
	// partition is scanned first by a lookup without the bound).
	want := herald.OverallStatus([]herald.DeliveryStatus{herald.DeliveryDelivered})
	if status, err := st.RecomputeNotificationStatus(ctx, tn.ID, id); err != nil || status != want {
		t.Fatalf("RecomputeNotificationStatus = %s, %v; want %s (the near row's delivered)", status, err, want)
	}
	if n, err := st.GetNotification(ctx, tn.ID, id); err != nil || !n.AcceptedAt.Equal(now) || n.Status != want ||
		len(n.Deliveries) != 1 || n.Deliveries[0].Status != herald.DeliveryDelivered {
		t.Fatalf("GetNotification = %+v, %v; want the near row, %s with its delivered email", n, err, want)
	}
	var farStatus, farDelivery string
	if err := tx.QueryRow(ctx, `SELECT n.status, d.status FROM notifications n JOIN deliveries d ON d.tenant_id = n.tenant_id AND d.notification_id = n.id AND d.accepted_at = n.accepted_at
		WHERE n.tenant_id = $1 AND n.id = $2 AND n.accepted_at < $3`, tn.ID, id, now.Add(-time.Hour)).Scan(&farStatus, &farDelivery); err != nil {
		t.Fatal(err)
	}
	if farStatus != string(herald.NotificationQueued) || farDelivery != string(herald.DeliveryPending) {
		t.Fatalf("the far row was changed: notification %s, delivery %s", farStatus, farDelivery)
	}
}
