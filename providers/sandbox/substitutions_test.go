package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/sandbox"
)

// TestBatchRecordsEachRecipientsOwnContent: a batch's substitutions are
// applied per recipient, so each recorded message (subject, body, payload) is
// what that recipient would receive; substitutions SendGrid would refuse fail
// the call.
func TestBatchRecordsEachRecipientsOwnContent(t *testing.T) {
	ctx := context.Background()
	rec := &sandbox.MemoryRecorder{}
	p := sandbox.New(rec)
	recipient := func(to, id, name, htmlName string) providers.BatchRecipient {
		return providers.BatchRecipient{To: to, Tags: providers.Tags{TenantID: "t_subs", NotificationID: id, Channel: herald.ChannelEmail},
			Substitutions: map[string]string{"-n0-": name, "-n1-": htmlName}}
	}
	msg := providers.EmailMessage{Subject: "Hi -n0-", Text: "Hello -n0-!", HTML: "<p>Hello -n1-!</p>"}
	to := []providers.BatchRecipient{
		recipient("a@example.com", "ntf_sa", "Ada", "Ada"),
		recipient("b@example.com", "ntf_sb", "<b>Bob</b>", "&lt;b&gt;Bob&lt;/b&gt;"),
		{To: "c@example.com", Tags: providers.Tags{TenantID: "t_subs", NotificationID: "ntf_sc", Channel: herald.ChannelEmail}},
	}
	if _, err := p.SendEmailBatch(ctx, msg, to); err != nil {
		t.Fatal(err)
	}
	msgs, err := rec.List(ctx, "t_subs", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sandbox.Message{}
	for _, m := range msgs {
		got[m.Recipient] = m
	}
	want := map[string][3]string{ // subject, body, html
		"a@example.com": {"Hi Ada", "Hello Ada!", "<p>Hello Ada!</p>"},
		"b@example.com": {"Hi <b>Bob</b>", "Hello <b>Bob</b>!", "<p>Hello &lt;b&gt;Bob&lt;/b&gt;!</p>"},
		"c@example.com": {"Hi -n0-", "Hello -n0-!", "<p>Hello -n1-!</p>"}, // no substitutions: the content as it is
	}
	for to, w := range want {
		m := got[to]
		var payload providers.EmailMessage
		if err := json.Unmarshal(m.Payload, &payload); err != nil {
			t.Fatal(err)
		}
		if m.Subject != w[0] || m.Body != w[1] || payload.Subject != w[0] || payload.Text != w[1] || payload.HTML != w[2] || payload.To != to {
			t.Errorf("%s: recorded %q / %q, payload %+v; want %q", to, m.Subject, m.Body, payload, w)
		}
	}

	big := recipient("d@example.com", "ntf_sd", strings.Repeat("x", providers.MaxSubstitutionBytes), "x")
	if _, err := p.SendEmailBatch(ctx, msg, []providers.BatchRecipient{big}); !providers.IsPermanent(err) {
		t.Fatalf("oversized substitutions: %v", err)
	}
}
