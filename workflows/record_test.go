package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
)

// recordEnv, when set to 1, makes TestRecordHistories run the live path's
// scenarios through the real API, worker, PostgreSQL and Temporal and write their
// histories to testdata/ with the manifest the replay test reads:
//
//	make test ARGS='-run TestRecordHistories ./workflows/' HERALD_RECORD_HISTORIES=1
//
// Record again only when a new workflow version is released (docs/versioning.md):
// a recorded history is the promise that runs already in flight keep replaying.
const recordEnv = "HERALD_RECORD_HISTORIES"

// TestRecordHistories records one history per scenario of the live path: one
// channel; all four channels; scheduled then cancelled; scheduled then due; a
// quiet-hours wait; ordered email (one released by its signal, the one that
// signalled it, one timed out); a dead letter. Each scenario must end in its
// expected status before it is written.
func TestRecordHistories(t *testing.T) {
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to record the replay histories")
	}
	sg := providertest.NewSendGrid()
	t.Cleanup(sg.Close)
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{SendGridBaseURL: sg.URL, HTTPClient: &http.Client{Timeout: 5 * time.Second}}})
	tenantID, key := h.TenantWith("record", "order")
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com", "phone": "+14155550100", "timezone": "UTC"})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/ada/push-tokens", key, map[string]any{"token": "device-token-ada-0001", "platform": "android"})
	submit := func(name string, extra map[string]any) string {
		t.Helper()
		body := map[string]any{"user_id": "ada", "template_id": "order", "idempotency_key": fmt.Sprintf("record-%s-%d", name, time.Now().UnixNano()),
			"data": map[string]any{"title": "Order 42", "body": "Your order shipped"}}
		for k, v := range extra {
			body[k] = v
		}
		return h.Accept(key, body)
	}

	type recorded struct{ name, id string }
	var runs []recorded

	id := submit("in_app", map[string]any{"channels": []string{"in_app"}, "dedup_ttl_sec": 5})
	h.AwaitStatus(key, id, "delivered", 30*time.Second)
	runs = append(runs, recorded{"in_app", id})

	id = submit("all_channels", map[string]any{"dedup_ttl_sec": 5})
	h.AwaitStatus(key, id, "sent", 30*time.Second)
	runs = append(runs, recorded{"all_channels", id})

	id = submit("scheduled_cancelled", map[string]any{"channels": []string{"email", "sms"}, "send_at": time.Now().Add(time.Minute).UTC().Format(time.RFC3339), "dedup_ttl_sec": 5})
	h.AwaitStatus(key, id, "scheduled", 30*time.Second)
	h.MustDo(http.StatusOK, http.MethodDelete, "/v1/notifications/"+id, key, nil)
	h.AwaitStatus(key, id, "cancelled", 30*time.Second)
	runs = append(runs, recorded{"scheduled_cancelled", id})

	// Scheduled, then due: numbered in the user's due sequence at send_at.
	id = submit("scheduled", map[string]any{"channels": []string{"in_app"}, "send_at": time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano), "dedup_ttl_sec": 5})
	h.AwaitStatus(key, id, "delivered", 30*time.Second)
	runs = append(runs, recorded{"scheduled", id})

	// Quiet hours from the last minute to the next one (minute resolution): the SMS
	// waits, re-reads preferences when the window ends, then sends.
	now := time.Now().UTC()
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/ada/preferences", key, map[string]any{"quiet_hours": map[string]any{
		"start": now.Add(-time.Minute).Format("15:04"), "end": now.Add(2 * time.Minute).Format("15:04"), "timezone": "UTC"}})
	id = submit("quiet_hours", map[string]any{"channels": []string{"in_app", "sms"}, "dedup_ttl_sec": 5})
	h.AwaitStatus(key, id, "sending", 30*time.Second)
	h.AwaitStatus(key, id, "sent", 4*time.Minute)
	runs = append(runs, recorded{"quiet_hours", id})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/ada/preferences", key, map[string]any{"quiet_hours": map[string]any{"start": "", "end": ""}})

	// Ordered email (docs/ordering.md): an earlier one whose provider fails until
	// the test lets it through, a later one waiting for it and released by its
	// signal; then one whose hold bound (1 s) runs out: order_timeout.
	h.ConfigureSendGrid(tenantID, `{"from":"shop@example.com"}`)
	subject := func(title string) func(*providertest.Request) bool {
		return func(r *providertest.Request) bool {
			m, err := providertest.DecodeMail(*r)
			return err == nil && (m.Subject == title || len(m.Personalizations) > 0 && m.Personalizations[0].Subject == title)
		}
	}
	ordered := func(name, title string) string {
		return submit(name, map[string]any{"channels": []string{"email"}, "ordering_key": "user", "dedup_ttl_sec": 5,
			"data": map[string]any{"title": title, "body": "Your order shipped"}})
	}
	sg.When(subject("Earlier"), providertest.Fail500())
	earlier := ordered("ordered_earlier", "Earlier")
	later := ordered("ordered_released", "Later")
	h.Eventually(30*time.Second, "the later one waiting", func() bool {
		_, chans := h.Channels(key, later)
		o, _ := chans["email"]["ordering"].(map[string]any)
		return o != nil && o["waiting"] == true
	})
	sg.ClearWhen()
	h.AwaitStatus(key, earlier, "sent", 60*time.Second)
	h.AwaitStatus(key, later, "sent", 30*time.Second)
	runs = append(runs, recorded{"ordered_earlier", earlier}, recorded{"ordered_released", later})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"ordering_max_hold": "1s"})
	sg.When(subject("Stuck"), providertest.Fail500())
	stuck := ordered("ordered_stuck", "Stuck")
	id = ordered("ordered_timeout", "Timed out")
	h.AwaitChannel(key, id, "email", "sent", "order_timeout", 30*time.Second)
	sg.ClearWhen()
	h.AwaitStatus(key, stuck, "sent", 60*time.Second)
	runs = append(runs, recorded{"ordered_timeout", id})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{})

	// A SendGrid outage with the tenant's email policy at 2 attempts: dead letter.
	sg.Always(providertest.Fail500())
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"retry_policies": map[string]any{"email": map[string]any{"maximum_attempts": 2, "initial_interval": "100ms"}}})
	id = submit("dead_letter", map[string]any{"channels": []string{"email"}, "dedup_ttl_sec": 5})
	h.AwaitStatus(key, id, "failed", 60*time.Second)
	runs = append(runs, recorded{"dead_letter", id})

	var manifest []recordedHistory
	for _, r := range runs {
		key, runID, err := ids.ParseNotificationID(r.id)
		if err != nil {
			t.Fatal(err)
		}
		wid := ids.NotificationWorkflowID(tenantID, key)
		// The window is 5 s: wait for the run to close so the history is complete.
		if err := h.Temporal.GetWorkflow(context.Background(), wid, runID).Get(context.Background(), nil); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		hist := exportHistory(t, h.Temporal, wid, runID)
		file := "notification_" + r.name + ".json"
		if err := os.WriteFile(filepath.Join("testdata", file), hist, 0o644); err != nil {
			t.Fatal(err)
		}
		manifest = append(manifest, recordedHistory{Scenario: r.name, File: file, WorkflowID: wid, RunID: runID})
	}
	raw, _ := json.MarshalIndent(manifest, "", "  ")
	if err := os.WriteFile(manifestFile, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exportHistory is the run's full history as `temporal workflow show -o json`
// writes it (protojson), the format client.HistoryFromJSON reads.
func exportHistory(t *testing.T, c client.Client, workflowID, runID string) []byte {
	t.Helper()
	var hist historypb.History
	it := c.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		hist.Events = append(hist.Events, ev)
	}
	raw, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&hist)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
