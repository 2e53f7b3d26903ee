package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// deadLetterNow sends a notification on channel while the provider is down (one
// attempt) and returns its id and its open dead letter.
func (e failEnv) deadLetterNow(t *testing.T, channel string) (string, map[string]any) {
	t.Helper()
	id := e.mustNotify(t, "queued", nil, channel)
	e.h.AwaitChannel(e.key, id, herald.Channel(channel), "failed", "dead_lettered", 15*time.Second)
	d := deadLetterOf(deadLetters(t, e.h, e.key, ""), id, channel)
	if d == nil {
		t.Fatalf("%s %s was not dead-lettered", id, channel)
	}
	return id, d
}

// TestRedriveAfterOptOutIsSuppressed: the user opted out of the category after the
// send was dead-lettered; the redrive sends nothing, records the channel
// suppressed (opted_out_category) and closes the dead letter instead of reopening it.
func TestRedriveAfterOptOutIsSuppressed(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	e.deadLetterEvery(t, "email")
	id, d := e.deadLetterNow(t, "email")

	e.h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/ada/preferences", e.key,
		map[string]any{"categories": map[string]any{"general": map[string]any{"enabled": false}}})
	e.sg.Recover()
	e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/"+dlID(d)+"/redrive", e.key, nil)
	ch := e.h.AwaitChannel(e.key, id, "email", "suppressed", "opted_out_category", 15*time.Second)
	h := e.h
	h.Eventually(5*time.Second, "dead letter closed", func() bool {
		return deadLetterOf(deadLetters(t, h, e.key, "?status=redriven"), id, "email") != nil
	})
	h.Eventually(5*time.Second, "overall suppressed", func() bool { o, _ := h.Channels(e.key, id); return o == "suppressed" })
	if deadLetterOf(deadLetters(t, h, e.key, ""), id, "email") != nil {
		t.Error("the dead letter is open again")
	}
	if e.sg.Calls() != 1 || e.sg.Accepted() != 0 || len(history(ch)) != 1 {
		t.Fatalf("the redrive sent after the opt-out: SendGrid calls %d accepted %d, history %v", e.sg.Calls(), e.sg.Accepted(), history(ch))
	}
}

// TestRedriveUsesTheCurrentAddress: the user's email address changed and their
// phone number was removed after the sends were dead-lettered; the redrive sends
// the email to the new address and suppresses the SMS (no_address).
func TestRedriveUsesTheCurrentAddress(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	e.deadLetterEvery(t, "email", "sms")
	mail, dMail := e.deadLetterNow(t, "email")
	sms, dSMS := e.deadLetterNow(t, "sms")

	e.h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/ada", e.key, map[string]any{"email": "ada.new@example.com"}) // PUT: the phone is gone
	e.sg.Recover()
	e.tw.Recover()
	e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/"+dlID(dMail)+"/redrive", e.key, nil)
	e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/"+dlID(dSMS)+"/redrive", e.key, nil)

	e.h.AwaitChannel(e.key, mail, "email", "sent", "", 15*time.Second)
	accepted := e.sg.AcceptedRequests()
	if len(accepted) != 1 {
		t.Fatalf("SendGrid accepted %d messages, want 1", len(accepted))
	}
	if body := string(accepted[0].Body); !strings.Contains(body, "ada.new@example.com") || strings.Contains(body, `"ada@example.com"`) {
		t.Fatalf("the redriven email went to %s, want ada.new@example.com", body)
	}
	e.h.AwaitChannel(e.key, sms, "sms", "suppressed", "no_address", 15*time.Second)
	if e.tw.Calls() != 1 || e.tw.Accepted() != 0 {
		t.Fatalf("the SMS redrive called Twilio: calls %d accepted %d", e.tw.Calls(), e.tw.Accepted())
	}
	h := e.h
	h.Eventually(5*time.Second, "both dead letters closed", func() bool {
		closed := deadLetters(t, h, e.key, "?status=redriven")
		return deadLetterOf(closed, mail, "email") != nil && deadLetterOf(closed, sms, "sms") != nil
	})
}
