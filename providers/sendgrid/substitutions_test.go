package sendgrid_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
)

// personalTemplate prints per-recipient variables in the subject, html and
// text parts, in element content and in attributes.
func personalTemplate() templates.Template {
	return templates.Template{ID: "spring", Version: 2, Category: "marketing", Email: &templates.EmailContent{
		Subject: "{{.name}}, your order {{.order}} is ready",
		HTML: `<h1>Hello {{.user.first_name}} {{.user.last_name}}</h1>` +
			`<p>Order <b>{{.order}}</b> for {{.name}}.</p><p><a href="https://shop.example/o/{{.order}}">track it</a></p>`,
		Text: "Hello {{.user.first_name}} {{.user.last_name}}\n\nOrder {{.order}} for {{.name}}.\nhttps://shop.example/o/{{.order}}",
	}}
}

// personalData is recipient i's data: plain names mostly, and every few a
// value html escapes (<script>, quotes, &, +), accents and emoji, a number.
func personalData(i int) map[string]any {
	first, last := fmt.Sprintf("User%d", i), "Example"
	name := first
	switch i % 7 {
	case 1:
		name = `<script>alert("hi")</script>`
	case 2:
		last = "O'Brien & Sons"
	case 3:
		first = "Zoë 🌷"
	case 4:
		name = "a+b <b>bold</b>"
	}
	return map[string]any{"name": name, "order": json.Number(fmt.Sprint(100000 + i)),
		"user": map[string]any{"first_name": first, "last_name": last}}
}

// TestContractPersonalizedBatch sends 1,000 recipients of one skeleton with
// their own substitutions through the SDK to the SendGrid fake: the request
// body conforms to sendgrid_mail_v3.json (replayed to a contract server), and
// every recipient's message, substitutions applied as SendGrid applies them, is
// byte for byte their own single render.
func TestContractPersonalizedBatch(t *testing.T) {
	tpl := personalTemplate()
	skel, err := templates.NewEmailSkeleton(tpl, "en", nil)
	if err != nil {
		t.Fatal(err)
	}
	renders := make([]templates.RenderedEmail, sendgrid.MaxPersonalizations)
	to := make([]providers.BatchRecipient, sendgrid.MaxPersonalizations)
	for i := range to {
		data := personalData(i)
		r, err := templates.Render(tpl, herald.ChannelEmail, "en", data)
		if err != nil {
			t.Fatal(err)
		}
		subs, ok := skel.Substitutions(r, data)
		if !ok {
			t.Fatalf("recipient %d (%v) is not batchable", i, data)
		}
		renders[i] = *r.Email
		tg := tags
		tg.NotificationID = fmt.Sprintf("n_%04d", i)
		to[i] = providers.BatchRecipient{To: fmt.Sprintf("user%d@example.com", i), Tags: tg, Substitutions: subs,
			Headers: map[string]string{"List-Unsubscribe": fmt.Sprintf("<https://herald.example/u/%d>", i)}}
	}
	fake := providertest.NewSendGrid()
	defer fake.Close()
	capture := &providertest.Capture{}
	c := newClient(t, fake.URL, capture.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := providers.EmailMessage{Subject: skel.Subject, HTML: skel.HTML, Text: skel.Text, Categories: []string{"marketing"}}
	res, err := c.SendEmailBatch(ctx, msg, to)
	if err != nil || res.ProviderMessageID == "" {
		t.Fatalf("batch: %+v %v", res, err)
	}
	if fake.Accepted() != 1 {
		t.Fatalf("%d mail sends accepted, want 1", fake.Accepted())
	}

	// The body the SDK sent conforms to the spec.
	ex := capture.Exchanges()
	if len(ex) != 1 {
		t.Fatalf("%d requests", len(ex))
	}
	p := mock(t)
	replay := &providertest.Capture{}
	req, err := newRawRequest(p.URL+"/v3/mail/send", string(ex[0].ReqBody))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := replay.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := replay.CheckConforms(); err != nil {
		t.Fatalf("%v\ncontract server log:\n%s", err, p.Log())
	}

	// The tokens went out once, in the shared content; each recipient got their own.
	m, err := providertest.DecodeMail(fake.AcceptedRequests()[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != skel.Subject || len(m.Personalizations) != len(to) || len(m.Personalizations[0].Substitutions) == 0 {
		t.Fatalf("mail send: subject %q, %d personalizations", m.Subject, len(m.Personalizations))
	}
	got := fake.Messages()
	if len(got) != len(to) {
		t.Fatalf("%d messages delivered, want %d", len(got), len(to))
	}
	for i, g := range got {
		want := renders[i]
		if len(g.To) != 1 || g.To[0] != to[i].To || g.CustomArgs[sendgrid.ArgNotificationID] != to[i].Tags.NotificationID {
			t.Fatalf("message %d went to %v (%v), want %s", i, g.To, g.CustomArgs, to[i].To)
		}
		if g.Subject != want.Subject || g.HTML != want.HTML || g.Text != want.Text {
			t.Fatalf("message %d is not its own render:\n got  %q\n      %q\n      %q\n want %q\n      %q\n      %q",
				i, g.Subject, g.HTML, g.Text, want.Subject, want.HTML, want.Text)
		}
		if g.Headers["List-Unsubscribe"] != to[i].Headers["List-Unsubscribe"] {
			t.Fatalf("message %d headers %v", i, g.Headers)
		}
	}
	// The escaped and the raw value: html escapes what text shows as it is.
	if s := got[1]; !strings.Contains(s.HTML, "&lt;script&gt;alert(&#34;hi&#34;)&lt;/script&gt;") ||
		!strings.Contains(s.Text, `<script>alert("hi")</script>`) || strings.Contains(s.HTML, "<script>") {
		t.Fatalf("recipient 1: html %q text %q", s.HTML, s.Text)
	}
}

// TestBatchSubstitutionLimits: the spec's limit on a personalization's
// substitutions (10,000 bytes), empty tags and a tag in the reply-to address are
// refused, permanently, before any request is made.
func TestBatchSubstitutionLimits(t *testing.T) {
	if templates.MaxSubstitutionBytes != providers.MaxSubstitutionBytes || providers.MaxSubstitutionBytes != providertest.SendGridMaxSubstitutionBytes {
		t.Fatalf("substitution limits differ: templates %d, providers %d, fake %d",
			templates.MaxSubstitutionBytes, providers.MaxSubstitutionBytes, providertest.SendGridMaxSubstitutionBytes)
	}
	fake := providertest.NewSendGrid()
	defer fake.Close()
	c := newClient(t, fake.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tg := tags
	ok := providers.BatchRecipient{To: "a@example.com", Tags: tg, Substitutions: map[string]string{"-k-": "v"}}
	withReplyTo := message()
	withReplyTo.ReplyTo = "help-k-@acme.example"
	cases := map[string]struct {
		msg  providers.EmailMessage
		subs map[string]string
	}{
		"over 10,000 bytes": {message(), map[string]string{"-k-": strings.Repeat("x", providers.MaxSubstitutionBytes-2)}},
		"empty tag":         {message(), map[string]string{"": "x"}},
		"tag in reply-to":   {withReplyTo, map[string]string{"-k-": "x"}},
	}
	for name, cs := range cases {
		bad := ok
		bad.To, bad.Substitutions = "b@example.com", cs.subs
		_, err := c.SendEmailBatch(ctx, cs.msg, []providers.BatchRecipient{ok, bad})
		if !providers.IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent refusal", name, err)
		}
	}
	if fake.Calls() != 0 {
		t.Fatalf("%d requests made for refused batches", fake.Calls())
	}
	// Exactly at the limit goes out.
	ok.Substitutions = map[string]string{"-k-": strings.Repeat("x", providers.MaxSubstitutionBytes-3)}
	if _, err := c.SendEmailBatch(ctx, message(), []providers.BatchRecipient{ok}); err != nil {
		t.Fatalf("substitutions at the limit: %v", err)
	}
}

// TestFakeRefusesOversizedSubstitutions: the fake answers 400, as SendGrid
// does, for a personalization whose substitutions exceed 10,000 bytes.
func TestFakeRefusesOversizedSubstitutions(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	subs, _ := json.Marshal(map[string]string{"-k-": strings.Repeat("x", providertest.SendGridMaxSubstitutionBytes)})
	body := `{"personalizations":[{"to":[{"email":"c@d.example"}]},{"to":[{"email":"e@f.example"}],"substitutions":` + string(subs) +
		`}],"from":{"email":"a@b.example"},"subject":"x","content":[{"type":"text/plain","value":"x"}]}`
	req, err := newRawRequest(fake.URL+"/v3/mail/send", body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := providertest.LoopbackClient(10 * time.Second).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || fake.Accepted() != 0 {
		t.Fatalf("status %d, accepted %d", resp.StatusCode, fake.Accepted())
	}
}
