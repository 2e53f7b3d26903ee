package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers/providertest"
)

// TestAcceptedAttemptIsCarriedByTheDeliveryRow: the accepted provider call is
// not a delivery_attempts row (migration 0156): the "sent" record carries
// its number, and GET /v1/notifications/{id} shows it as before, after the
// calls that failed (rows), numbered after them, at the channel's sent_at,
// with the provider that accepted. First-try successes (email, SMS), retries
// then success, and a permanent failure.
func TestAcceptedAttemptIsCarriedByTheDeliveryRow(t *testing.T) {
	h, f, tenantID, key := setup(t)
	fastRetries(t, h, tenantID)
	pool := testenv.Pool(t)
	rows := func(id string) (accepted, other int) {
		t.Helper()
		if err := dbx.WithNotificationIDs(pool).QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE outcome = 'accepted'), count(*) FILTER (WHERE outcome <> 'accepted')
			FROM delivery_attempts WHERE tenant_id = $1 AND notification_id = $2`, tenantID, id).Scan(&accepted, &other); err != nil {
			t.Fatal(err)
		}
		return accepted, other
	}
	type want struct {
		attempt  float64
		provider string
		outcome  string
	}
	check := func(name, id string, ch herald.Channel, status herald.DeliveryStatus, wants []want, wantRows int) {
		t.Helper()
		got := h.AwaitChannel(key, id, ch, status, "", 30*time.Second)
		hist, _ := got["history"].([]any)
		if len(hist) != len(wants) {
			t.Fatalf("%s: history %v, want %d attempts", name, hist, len(wants))
		}
		for i, w := range wants {
			a := hist[i].(map[string]any)
			if a["attempt"] != w.attempt || a["provider"] != w.provider || a["outcome"] != w.outcome || (w.outcome == "accepted") != (a["error"] == nil) {
				t.Errorf("%s: attempt %d is %v, want %+v", name, i+1, a, w)
			}
			if w.outcome == "accepted" && a["at"] != got["sent_at"] {
				t.Errorf("%s: the accepted attempt at %v, the channel sent at %v", name, a["at"], got["sent_at"])
			}
		}
		if accepted, other := rows(id); accepted != 0 || other != wantRows {
			t.Errorf("%s: delivery_attempts holds %d accepted and %d other rows, want 0 and %d", name, accepted, other, wantRows)
		}
	}

	id := send(h, key, "email", "sms")
	check("first-try email", id, "email", "sent", []want{{1, "sendgrid", "accepted"}}, 0)
	check("first-try SMS", id, "sms", "sent", []want{{1, "twilio", "accepted"}}, 0)

	f.SendGrid.Next(providertest.Fail500(), providertest.Fail500())
	id = send(h, key, "email")
	check("retries then success", id, "email", "sent",
		[]want{{1, "sendgrid", "retryable"}, {2, "sendgrid", "retryable"}, {3, "sendgrid", "accepted"}}, 2)

	f.SendGrid.Next(f.SendGrid.InvalidAddress())
	id = send(h, key, "email")
	check("permanent failure", id, "email", "failed", []want{{1, "sendgrid", "permanent"}}, 1)
}
